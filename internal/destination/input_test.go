package destination_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestParseDeliverInputAccepts(t *testing.T) {
	t.Parallel()
	raw := ` {"destination":"notify","params":{"to":"requester@example.com"},"payload":{"text": "hi"}} `
	in, err := destination.ParseDeliverInput(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if in.Destination != "notify" || string(in.Params) != `{"to":"requester@example.com"}` || string(in.Payload) != `{"text": "hi"}` {
		t.Fatalf("parsed %+v", in)
	}
	in, err = destination.ParseDeliverInput(json.RawMessage(`{"payload":{},"destination":"crm-eu_1","params":null}`))
	if err != nil || string(in.Params) != `{}` {
		t.Fatalf("params null: %+v %v", in, err)
	}
	in, err = destination.ParseDeliverInput(json.RawMessage(`{"payload":{},"destination":"webhook"}`))
	if err != nil || string(in.Params) != `{}` {
		t.Fatalf("params absent: %+v %v", in, err)
	}
}

func TestParseDeliverInputRejects(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("x", destination.MaxPayloadBytes) + `"`
	cases := []struct{ name, raw, field, want string }{
		{"empty", ``, "", "JSON object"},
		{"null", `null`, "", "JSON object"},
		{"array", `[]`, "", "JSON object"},
		{"missing destination", `{"payload":{}}`, "destination", "required"},
		{"missing payload", `{"destination":"notify"}`, "payload", "required"},
		{"payload not object", `{"destination":"notify","payload":"text"}`, "payload", "JSON object"},
		{"payload null", `{"destination":"notify","payload":null}`, "payload", "JSON object"},
		{"params not object", `{"destination":"notify","params":[1],"payload":{}}`, "params", "JSON object"},
		{"destination not string", `{"destination":1,"payload":{}}`, "destination", "string"},
		{"destination a URL", `{"destination":"https://x.example/h","payload":{}}`, "destination", "lowercase"},
		{"destination upper", `{"destination":"Notify","payload":{}}`, "destination", "lowercase"},
		{"destination too long", `{"destination":"` + strings.Repeat("a", 65) + `","payload":{}}`, "destination", "1 to 64"},
		{"unknown field", `{"destination":"notify","payload":{},"url":"x"}`, "", `unknown field "url"`},
		{"case variant", `{"Destination":"notify","payload":{}}`, "", `unknown field "Destination"`},
		{"duplicate", `{"destination":"notify","destination":"crm","payload":{}}`, "destination", "more than once"},
		{"trailing", `{"destination":"notify","payload":{}} {}`, "", "single JSON object"},
		{"truncated", `{"destination":"notify","payload":{}`, "", "not valid JSON"},
		{"payload too big", `{"destination":"notify","payload":{"a":` + big[:destination.MaxPayloadBytes-5] + `"}}`, "payload", "more than the 32768"},
		{"params too big", `{"destination":"notify","params":{"a":"` + strings.Repeat("x", destination.MaxParamsBytes) + `"},"payload":{}}`, "params", "more than the 4096"},
		{"input too big", `{"destination":"notify","payload":{"a":` + big + big + `}}`, "", "more than the 49152"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := destination.ParseDeliverInput(json.RawMessage(tc.raw))
			if err == nil {
				t.Fatalf("accepted %.80s", tc.raw)
			}
			if c := retrypolicy.Classify(err); c.Class != retrypolicy.PermanentInput {
				t.Errorf("class %v, want permanent_input", c.Class)
			}
			var ie *destination.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("%v is not an *InputError", err)
			}
			if ie.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q (field %q), want field %q mentioning %q", err, ie.Field, tc.field, tc.want)
			}
		})
	}
}

func TestDeliverInputErrorsDoNotEchoValues(t *testing.T) {
	t.Parallel()
	const secret = "customer-private-text-0451"
	for _, raw := range []string{
		`{"destination":"` + secret + ` X","payload":{}}`,
		`{"destination":"notify","payload":"` + secret + `"}`,
		`{"destination":"notify","params":"` + secret + `","payload":{}}`,
		`{"destination":"notify","payload":{"a":"` + secret + `"},"x":1}`,
		`{"destination":"notify","payload":{"a":"` + secret + `"}`,
	} {
		_, err := destination.ParseDeliverInput(json.RawMessage(raw))
		if err == nil {
			t.Fatalf("accepted %s", raw)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error echoes a value: %v", err)
		}
	}
}

func TestParseParams(t *testing.T) {
	t.Parallel()
	var p struct {
		To string `json:"to"`
	}
	if err := destination.ParseParams("notify", json.RawMessage(`{"to":"a@example.com"}`), &p); err != nil || p.To != "a@example.com" {
		t.Fatalf("ParseParams = %+v, %v", p, err)
	}
	if err := destination.ParseParams("notify", nil, &p); err != nil {
		t.Fatalf("empty params: %v", err)
	}
	const secret = "private-0451"
	for _, raw := range []string{`{"to":1}`, `{"cc":"` + secret + `"}`, `["` + secret + `"]`, `{"to":"x"} {}`, `{"to":"` + secret} {
		err := destination.ParseParams("notify", json.RawMessage(raw), &p)
		var pe *destination.ParamsError
		if !errors.As(err, &pe) || retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
			t.Errorf("%s: err %v, want a permanent *ParamsError", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error echoes a value: %v", raw, err)
		}
	}
}

// FuzzParseDeliverInput: any input either parses into a registered-name
// shape with object params and payload, or fails with a permanent
// *InputError; nothing panics.
func FuzzParseDeliverInput(f *testing.F) {
	for _, s := range []string{
		`{"destination":"notify","params":{"to":"a@example.com"},"payload":{"text":"hi"}}`,
		`{"destination":"crm","payload":{}}`, `{"payload":{}}`, `[]`, `{"destination":"x","payload":{},"payload":{}}`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		in, err := destination.ParseDeliverInput(json.RawMessage(raw))
		if err != nil {
			var ie *destination.InputError
			if !errors.As(err, &ie) || retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
				t.Fatalf("error %v is not a permanent *InputError", err)
			}
			return
		}
		if !destination.ValidName(in.Destination) || in.Params[0] != '{' || in.Payload[0] != '{' || !json.Valid(in.Payload) || !json.Valid(in.Params) {
			t.Fatalf("accepted %q as %+v", raw, in)
		}
	})
}
