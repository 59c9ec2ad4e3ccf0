package contract_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestParseGenerateInputAccepts(t *testing.T) {
	t.Parallel()
	in, err := contract.ParseGenerateInput(json.RawMessage(` {"prompt":"hi","system":"be brief","max_tokens":8192,"temperature":0.5,"simulate":"throttle"} `))
	if err != nil {
		t.Fatalf("ParseGenerateInput: %v", err)
	}
	if in.Prompt != "hi" || in.System != "be brief" || in.MaxTokens != 8192 || in.Temperature == nil || *in.Temperature != 0.5 || in.Simulate != "throttle" {
		t.Fatalf("parsed %+v", in)
	}

	in, err = contract.ParseGenerateInput(json.RawMessage(`{"prompt":"x","temperature":null,"max_tokens":null,"system":null}`))
	if err != nil {
		t.Fatalf("nulls for optional fields: %v", err)
	}
	if in.Temperature != nil || in.MaxTokens != 0 || in.System != "" {
		t.Fatalf("nulls parsed as %+v", in)
	}
}

func TestParseGenerateInputRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw, field, want string
	}{
		{"empty", ``, "", "JSON object"},
		{"null", `null`, "", "JSON object"},
		{"array", `[{"prompt":"x"}]`, "", "JSON object"},
		{"string", `"x"`, "", "JSON object"},
		{"missing prompt", `{}`, "prompt", "required"},
		{"blank prompt", `{"prompt":"  \n"}`, "prompt", "blank"},
		{"prompt not string", `{"prompt":3}`, "prompt", "must be a string"},
		{"unknown field", `{"prompt":"x","top_p":1}`, "", `unknown field "top_p"`},
		{"case variant", `{"Prompt":"x"}`, "", `unknown field "Prompt"`},
		{"duplicate", `{"prompt":"x","prompt":"y"}`, "prompt", "more than once"},
		{"max_tokens high", `{"prompt":"x","max_tokens":8193}`, "max_tokens", "1 to 8192"},
		{"max_tokens negative", `{"prompt":"x","max_tokens":-1}`, "max_tokens", "1 to 8192"},
		{"max_tokens fraction", `{"prompt":"x","max_tokens":1.5}`, "max_tokens", "integer"},
		{"max_tokens string", `{"prompt":"x","max_tokens":"10"}`, "max_tokens", "integer"},
		{"temperature high", `{"prompt":"x","temperature":2.01}`, "temperature", "0 to 2"},
		{"temperature negative", `{"prompt":"x","temperature":-0.1}`, "temperature", "0 to 2"},
		{"temperature string", `{"prompt":"x","temperature":"hot"}`, "temperature", "number"},
		{"simulate unknown", `{"prompt":"x","simulate":"explode"}`, "simulate", "accept_lose_reply"},
		{"trailing object", `{"prompt":"x"}{"prompt":"y"}`, "", "single JSON object"},
		{"trailing garbage", `{"prompt":"x"} !`, "", ""},
		{"truncated", `{"prompt":"x"`, "", "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := contract.ParseGenerateInput(json.RawMessage(tc.raw))
			if err == nil {
				t.Fatalf("accepted %s", tc.raw)
			}
			if c := retrypolicy.Classify(err); c.Class != retrypolicy.PermanentInput {
				t.Errorf("class = %v, want permanent_input", c.Class)
			}
			var ie *contract.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is not an *InputError", err)
			}
			if ie.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", ie.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestInputErrorsDoNotEchoValues(t *testing.T) {
	t.Parallel()
	const secret = "my-very-private-prompt-text"
	for _, raw := range []string{
		`{"prompt":"` + secret + `","max_tokens":"` + secret + `"}`,
		`{"prompt":"` + secret + `","simulate":"` + secret + `"}`,
		`{"prompt":"` + secret + `","temperature":"` + secret + `"}`,
		`{"prompt":` + secret + `}`,
	} {
		_, err := contract.ParseGenerateInput(json.RawMessage(raw))
		if err == nil {
			t.Fatalf("accepted %s", raw)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error echoes the input value: %v", err)
		}
	}
}

func TestGenerateInputOfKind(t *testing.T) {
	t.Parallel()
	in := json.RawMessage(`{"prompt":"x"}`)
	for _, kind := range []string{"", contract.KindGenerate} {
		if _, err := contract.GenerateInputOf(contract.Request{Kind: kind, Input: in}); err != nil {
			t.Errorf("kind %q: %v", kind, err)
		}
	}
	_, err := contract.GenerateInputOf(contract.Request{Kind: "translate", Input: in})
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.PermanentInput {
		t.Fatalf("unsupported kind: err %v class %v, want permanent_input", err, c.Class)
	}
}

func TestGenerateOutputShape(t *testing.T) {
	t.Parallel()
	raw, err := contract.GenerateOutput{Text: "t", Model: "m", StopReason: "end_turn", Usage: contract.Usage{InputTokens: 1, OutputTokens: 2}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"text":"t","model":"m","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}`
	if string(raw) != want {
		t.Fatalf("output = %s, want %s", raw, want)
	}
}
