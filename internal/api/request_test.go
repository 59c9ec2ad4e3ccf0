package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func hdr(kv ...string) map[string]string {
	h := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

var defaultLimits = limits{body: MaxBody, input: MaxInput}

func TestPayloadHashIgnoresOrderAndWhitespace(t *testing.T) {
	t.Parallel()
	forms := []string{
		`{"kind":"generate","input":{"prompt":"hi","max_tokens":10,"temperature":0.5}}`,
		`{"input":{"temperature":0.5,"max_tokens":10,"prompt":"hi"},"kind":"generate"}`,
		"{\n\t\"input\" : {\r\n \"max_tokens\" : 10 , \"prompt\":\"hi\",\"temperature\":0.5 } ,\n \"kind\" : \"generate\" }\n",
		`{"kind":"generate","input":{"prompt":"\u0068i","max_tokens":10,"temperature":0.5}}`,
	}
	var want string
	for i, f := range forms {
		s, p := parseSubmit(hdr("content-type", "application/json", "idempotency-key", "k"), []byte(f), defaultLimits)
		if p != nil {
			t.Fatalf("form %d rejected: %+v", i, p)
		}
		h := payloadHash(s.kind, s.input, "")
		if i == 0 {
			want = h
			if s.input != `{"max_tokens":10,"prompt":"hi","temperature":0.5}` {
				t.Fatalf("canonical input %s", s.input)
			}
		} else if h != want {
			t.Fatalf("form %d hashes to %s, form 0 to %s", i, h, want)
		}
	}
	// Different payloads hash differently: value, number spelling, parent.
	for _, other := range []string{
		`{"kind":"generate","input":{"prompt":"hi","max_tokens":11,"temperature":0.5}}`,
		`{"kind":"generate","input":{"prompt":"hi","max_tokens":10,"temperature":0.50}}`,
		`{"kind":"generate","input":{"prompt":"hi ","max_tokens":10,"temperature":0.5}}`,
	} {
		s, p := parseSubmit(hdr("content-type", "application/json", "idempotency-key", "k"), []byte(other), defaultLimits)
		if p != nil {
			t.Fatal(p)
		}
		if payloadHash(s.kind, s.input, "") == want {
			t.Fatalf("%s hashes like form 0", other)
		}
	}
	canon := `{"max_tokens":10,"prompt":"hi","temperature":0.5}`
	if payloadHash("generate", canon, "t_aaaaaaaaaaaaaaaaaaaaaaaaaa") == want {
		t.Fatal("parent_task_id does not change the hash")
	}
	got, err := PayloadSHA256("generate", json.RawMessage(` { "temperature":0.5, "prompt":"hi","max_tokens":10 }`), "")
	if err != nil || got != want {
		t.Fatalf("PayloadSHA256 = %s, %v; want %s", got, err, want)
	}
	if len(want) != 64 || strings.ToLower(want) != want {
		t.Fatalf("hash %q is not lower-case hex SHA-256", want)
	}
}

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"b":1,"a":[3, 2,{"z":null,"y":true}]}`: `{"a":[3,2,{"y":true,"z":null}],"b":1}`,
		`{"n":1.0e3,"m":-0}`:                     `{"m":-0,"n":1.0e3}`,
		`{"s":"<&>\u00e9"}`:                      `{"s":"<&>é"}`,
		` "x" `:                                  `"x"`,
	}
	for in, want := range cases {
		got, err := CanonicalJSON([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `{`, `{} {}`, `{"a":1}x`} {
		if _, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) accepted", bad)
		}
	}
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	ok := []string{"a", "8e03978e-40d5-43e8-bc93-6894a57f9324", "with inner space", "~!@#$%^&*()", strings.Repeat("k", 255), `"quoted"`}
	bad := []string{"", " a", "a ", "tab\there", "nl\n", "del\x7f", "é", strings.Repeat("k", 256)}
	for _, s := range ok {
		if !printable(s, MaxIdempotencyKey) {
			t.Errorf("%q rejected", s)
		}
	}
	for _, s := range bad {
		if printable(s, MaxIdempotencyKey) {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestParseRegenerate(t *testing.T) {
	t.Parallel()
	h := hdr("idempotency-key", "k")
	for _, b := range []string{"", "  \n", "{}"} {
		hh := h
		if strings.TrimSpace(b) != "" {
			hh = hdr("idempotency-key", "k", "content-type", "application/json")
		}
		s, p := parseRegenerate(hh, []byte(b), defaultLimits)
		if p != nil || s.input != "" || s.key != "k" {
			t.Fatalf("body %q: %+v %+v", b, s, p)
		}
	}
	s, p := parseRegenerate(hdr("idempotency-key", "k", "content-type", "application/json"), []byte(`{"input":{"prompt":"x"}}`), defaultLimits)
	if p != nil || s.input != `{"prompt":"x"}` {
		t.Fatalf("%+v %+v", s, p)
	}
	for b, typ := range map[string]string{
		`{"input":null}`:                 TypeInvalidBody,
		`{"kind":"generate"}`:            TypeInvalidBody,
		`{"input":{"prompt":"x","x":1}}`: TypeInvalidInput,
		`{"input":`:                      TypeMalformedJSON,
		strings.Repeat(" ", MaxBody+1):   TypeBodyTooLarge,
	} {
		_, p := parseRegenerate(hdr("idempotency-key", "k", "content-type", "application/json"), []byte(b), defaultLimits)
		if p == nil || p.Type != typ {
			t.Errorf("body %.30q: problem %+v, want %s", b, p, typ)
		}
	}
	if _, p := parseRegenerate(hdr("idempotency-key", "k"), []byte(`{}`), defaultLimits); p == nil || p.Type != TypeUnsupportedMediaType {
		t.Errorf("a body without Content-Type: %+v", p)
	}
}

func TestDecodeBody(t *testing.T) {
	t.Parallel()
	if b, p := decodeBody("eyJhIjoxfQ==", true, 10); p != nil || string(b) != `{"a":1}` {
		t.Fatalf("%s %+v", b, p)
	}
	if _, p := decodeBody("not base64!", true, 10); p == nil || p.Status != 400 {
		t.Fatalf("bad base64: %+v", p)
	}
	if _, p := decodeBody(strings.Repeat("QUFB", 10), true, 10); p == nil || p.Status != 413 {
		t.Fatalf("oversized base64: %+v", p)
	}
	if _, p := decodeBody(strings.Repeat("x", 11), false, 10); p == nil || p.Status != 413 {
		t.Fatalf("oversized: %+v", p)
	}
}
