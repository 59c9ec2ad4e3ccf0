package api

import (
	"bytes"
	"encoding/json"
	"mime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

// absent marks a header the fuzzer leaves out.
const absent = "\x00absent"

func seedSubmit(f *testing.F) {
	valid := `{"kind":"generate","input":{"prompt":"hi","max_tokens":16,"temperature":0.2,"system":"be brief","simulate":"throttle"}}`
	f.Add("8e03978e-40d5-43e8-bc93-6894a57f9324", "application/json", valid)
	f.Add("k", "application/json; charset=utf-8", `{"input":{"prompt":"x"},"kind":"generate"}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x","max_tokens":null,"temperature":null}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x"},"budget":{"max_cost_usd":0.50,"max_total_tokens":900}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x"},"budget":{"max_cost_usd":1e2}}`)
	f.Add(absent, "application/json", valid)
	f.Add("", "application/json", valid)
	f.Add(" k", "application/json", valid)
	f.Add(strings.Repeat("k", 256), "application/json", valid)
	f.Add("k\x7f", "application/json", valid)
	f.Add("ключ", "application/json", valid)
	f.Add("k", "text/plain", valid)
	f.Add("k", absent, valid)
	f.Add("k", "application/json; charset=latin1", valid)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x"},"extra":1}`)
	f.Add("k", "application/json", `{"kind":"generate","kind":"generate","input":{"prompt":"x"}}`)
	f.Add("k", "application/json", `{"kind":"other","input":{"prompt":"x"}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":""}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x","prompt":"y"}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x","top_p":1}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x","max_tokens":1e3}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x","temperature":"NaN"}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":[]}`)
	f.Add("k", "application/json", `{"kind":"generate","input":null}`)
	f.Add("k", "application/json", `{"kind":"generate"`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x"}} {}`)
	f.Add("k", "application/json", "{\"kind\":\"generate\",\"input\":{\"prompt\":\"\xff\"}}")
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"\ud800"}}`)
	f.Add("k", "application/json", `[]`)
	f.Add("k", "application/json", `null`)
	f.Add("k", "application/json", ``)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"`+strings.Repeat("x", MaxInput)+`"}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"`+strings.Repeat("x", MaxBody)+`"}}`)
	f.Add("k", "application/json", `{"kind":"generate","input":{"prompt":"x"`+strings.Repeat(`,"a":[[[[[[[[]]]]]]]]`, 3)+`}}`)
}

// FuzzParseSubmit checks that request parsing never panics and never
// accepts what the contract rejects; every rejection is a well-formed
// 400/413/415 problem.
func FuzzParseSubmit(f *testing.F) {
	seedSubmit(f)
	f.Fuzz(func(t *testing.T, key, ctype, body string) {
		h := map[string]string{}
		if key != absent {
			h[HeaderIdempotencyKey] = key
		}
		if ctype != absent {
			h["content-type"] = ctype
		}
		s, p := parseSubmit(h, []byte(body), defaultLimits)
		if p != nil {
			checkProblem(t, p)
			return
		}
		// Accepted: every rule of the contract holds, checked independently.
		if len(key) < 1 || len(key) > 255 || key == absent || s.key != key {
			t.Fatalf("accepted key %q", key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("accepted key with byte %#x", key[i])
			}
		}
		if len(body) > MaxBody {
			t.Fatalf("accepted a %d-byte body", len(body))
		}
		if mt, _, err := mime.ParseMediaType(ctype); err != nil || mt != "application/json" {
			t.Fatalf("accepted Content-Type %q", ctype)
		}
		if !utf8.ValidString(body) || !json.Valid([]byte(body)) {
			t.Fatalf("accepted a body that is not UTF-8 JSON: %q", body)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &top); err != nil || len(top) != 2+btoi(top["budget"] != nil) || top["kind"] == nil || top["input"] == nil {
			t.Fatalf("accepted body %q: want exactly kind and input (and a budget)", body)
		}
		if (top["budget"] != nil) != s.budget.present() {
			t.Fatalf("body %q: budget %+v", body, s.budget)
		}
		if s.kind != contract.KindGenerate {
			t.Fatalf("accepted kind %q", s.kind)
		}
		if len(s.input) > MaxInput {
			t.Fatalf("accepted a %d-byte input", len(s.input))
		}
		if _, err := contract.ParseGenerateInput(json.RawMessage(s.input)); err != nil {
			t.Fatalf("accepted input %s that the worker rejects: %v", s.input, err)
		}
		if _, err := contract.ParseGenerateInput(top["input"]); err != nil {
			t.Fatalf("accepted raw input %s the contract rejects: %v", top["input"], err)
		}
		again, err := CanonicalJSON([]byte(s.input))
		if err != nil || string(again) != s.input {
			t.Fatalf("stored input %s is not canonical (%s, %v)", s.input, again, err)
		}
		// The stored form parses back to the same hash.
		resubmit := `{"kind":"generate","input":` + s.input
		if s.budget.present() {
			resubmit += `,"budget":` + s.budget.canonical()
		}
		s2, p2 := parseSubmit(h, []byte(resubmit+`}`), defaultLimits)
		if p2 != nil || budgetHash(s2.kind, s2.input, s2.budget) != budgetHash(s.kind, s.input, s.budget) {
			t.Fatalf("canonical resubmission differs: %+v %+v", s2, p2)
		}
	})
}

// FuzzParseRegenerate: the optional-body variant never panics and only
// accepts an absent/empty input or a valid one.
func FuzzParseRegenerate(f *testing.F) {
	f.Add("k", "application/json", `{"input":{"prompt":"x"}}`)
	f.Add("k", absent, ``)
	f.Add("k", "application/json", `{}`)
	f.Add("k", "application/json", `{"input":null}`)
	f.Add("k", "application/json", `{"kind":"generate"}`)
	f.Add(absent, "application/json", `{}`)
	f.Fuzz(func(t *testing.T, key, ctype, body string) {
		h := map[string]string{}
		if key != absent {
			h[HeaderIdempotencyKey] = key
		}
		if ctype != absent {
			h["content-type"] = ctype
		}
		s, p := parseRegenerate(h, []byte(body), defaultLimits)
		if p != nil {
			checkProblem(t, p)
			return
		}
		if !printable(key, MaxIdempotencyKey) || len(body) > MaxBody {
			t.Fatalf("accepted key %q / %d-byte body", key, len(body))
		}
		if len(bytes.TrimSpace([]byte(body))) > 0 {
			if mt, _, err := mime.ParseMediaType(ctype); err != nil || mt != "application/json" {
				t.Fatalf("accepted a body with Content-Type %q", ctype)
			}
		}
		if s.input != "" {
			if _, err := contract.ParseGenerateInput(json.RawMessage(s.input)); err != nil || len(s.input) > MaxInput {
				t.Fatalf("accepted input %s: %v", s.input, err)
			}
		}
	})
}

// FuzzCanonicalJSON: canonicalisation is idempotent and keeps the value.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":2}`, `[1,2.50,{"x":"\u00e9<"}]`, `"s"`, `1e400`, `{"a":{"a":{"a":null}}}`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := CanonicalJSON([]byte(in))
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form %q of %q is not JSON", c, in)
		}
		c2, err := CanonicalJSON(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, c, c2, err)
		}
		if bytes.ContainsAny(c, "\n\t") {
			t.Fatalf("whitespace left in %q", c)
		}
	})
}

func checkProblem(t *testing.T, p *Problem) {
	t.Helper()
	switch p.Status {
	case 400, 413, 415:
	default:
		t.Fatalf("parse problem with status %d: %+v", p.Status, p)
	}
	if !strings.HasPrefix(p.Type, ProblemBase) || p.Title == "" || p.Detail == "" {
		t.Fatalf("ill-formed problem %+v", p)
	}
	r := p.response()
	if r.StatusCode != p.Status || r.Headers["Content-Type"] != "application/problem+json" || !json.Valid([]byte(r.Body)) {
		t.Fatalf("problem response %+v", r)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
