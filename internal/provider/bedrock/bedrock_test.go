package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

const model = "anthropic.claude-3-haiku-20240307-v1:0"

// awsConfig is a real SDK configuration pointed at a local server.
func awsConfig(endpoint string, maxAttempts int) aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI", ""),
		RetryMaxAttempts: maxAttempts,
		BaseEndpoint:     aws.String(endpoint),
	}
}

func setup(t *testing.T, h http.HandlerFunc) *bedrock.Provider {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	p, err := bedrock.NewFromConfig(awsConfig(srv.URL, 1), bedrock.Options{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func req(opID string) contract.Request {
	return contract.Request{
		OperationID: opID, Attempt: 1, Kind: contract.KindGenerate,
		Input: json.RawMessage(`{"prompt":"Summarise the ledger","system":"Be terse","max_tokens":64,"temperature":0.2}`),
	}
}

const okBody = `{"output":{"message":{"role":"assistant","content":[{"text":"The ledger "},{"text":"records tasks."}]}},"stopReason":"end_turn","usage":{"inputTokens":11,"outputTokens":4,"totalTokens":15},"metrics":{"latencyMs":1}}`

func respond(w http.ResponseWriter, status int, errType, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Requestid", "req-0001")
	if errType != "" {
		w.Header().Set("X-Amzn-Errortype", errType)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func TestConverseRequestAndResult(t *testing.T) {
	t.Parallel()
	type sent struct {
		Messages []struct {
			Role    string
			Content []struct{ Text string }
		}
		System          []struct{ Text string }
		InferenceConfig struct {
			MaxTokens   int
			Temperature float64
		}
		RequestMetadata map[string]string
	}
	var got sent
	var method, path, auth string
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		method, path, auth = r.Method, r.URL.Path, r.Header.Get("Authorization")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		respond(w, 200, "", okBody)
	})
	res, err := p.Generate(t.Context(), req("task-1"))
	if err != nil {
		t.Fatal(err)
	}
	if method != "POST" || path != "/model/"+model+"/converse" || !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") {
		t.Errorf("request %s %s, auth %q", method, path, auth)
	}
	if len(got.Messages) != 1 || got.Messages[0].Role != "user" || len(got.Messages[0].Content) != 1 || got.Messages[0].Content[0].Text != "Summarise the ledger" {
		t.Errorf("messages %+v", got.Messages)
	}
	if len(got.System) != 1 || got.System[0].Text != "Be terse" {
		t.Errorf("system %+v", got.System)
	}
	if got.InferenceConfig.MaxTokens != 64 || math.Abs(got.InferenceConfig.Temperature-0.2) > 1e-6 {
		t.Errorf("inferenceConfig %+v", got.InferenceConfig)
	}
	if got.RequestMetadata[bedrock.MetadataOperationKey] != "task-1" {
		t.Errorf("requestMetadata %v", got.RequestMetadata)
	}
	if res.Provider != "bedrock" || res.ProviderRef != "req-0001" {
		t.Errorf("result %+v", res)
	}
	const wantOut = `{"text":"The ledger records tasks.","model":"` + model + `","stop_reason":"end_turn","usage":{"input_tokens":11,"output_tokens":4}}`
	if string(res.Output) != wantOut {
		t.Errorf("output %s\nwant %s", res.Output, wantOut)
	}
	if res.Usage == nil || *res.Usage != (contract.Usage{InputTokens: 11, OutputTokens: 4}) || p.Model() != model {
		t.Errorf("reported usage %+v, model %q; want 11+4 tokens of %s", res.Usage, p.Model(), model)
	}
	if p.HonoursIdempotencyKey() {
		t.Error("HonoursIdempotencyKey = true")
	}
	if _, err := p.Lookup(t.Context(), "task-1"); !errors.Is(err, contract.ErrNoReadback) {
		t.Errorf("Lookup = %v, want ErrNoReadback", err)
	}
}

func TestMinimalInputOmitsOptionalFields(t *testing.T) {
	t.Parallel()
	var body map[string]json.RawMessage
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&body)
		respond(w, 200, "", okBody)
	})
	if _, err := p.Generate(t.Context(), contract.Request{OperationID: "op", Input: json.RawMessage(`{"prompt":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"system", "inferenceConfig"} {
		if _, ok := body[k]; ok {
			t.Errorf("%s sent although unset: %s", k, body[k])
		}
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		status  int
		errType string
		body    string
		class   retrypolicy.Class
	}{
		{"throttling", 429, "ThrottlingException", `{"message":"Too many requests, please wait before trying again."}`, retrypolicy.Transient},
		{"quota", 400, "ServiceQuotaExceededException", `{"message":"Too many tokens"}`, retrypolicy.Transient},
		{"unavailable", 503, "ServiceUnavailableException", `{"message":"Service unavailable"}`, retrypolicy.Transient},
		{"model not ready", 429, "ModelNotReadyException", `{"message":"not ready"}`, retrypolicy.Transient},
		{"internal", 500, "InternalServerException", `{"message":"internal"}`, retrypolicy.Transient},
		{"model timeout", 408, "ModelTimeoutException", `{"message":"timeout"}`, retrypolicy.Transient},
		{"too long", 400, "ValidationException", `{"message":"Input is too long for requested model."}`, retrypolicy.PermanentInput},
		{"validation", 400, "ValidationException", `{"message":"temperature: must be less than 1"}`, retrypolicy.PermanentInput},
		{"bad model id", 400, "ValidationException", `{"message":"The provided model identifier is invalid."}`, retrypolicy.PermanentConfig},
		{"access denied", 403, "AccessDeniedException", `{"message":"You don't have access to the model with the specified model ID."}`, retrypolicy.PermanentConfig},
		{"not found", 404, "ResourceNotFoundException", `{"message":"Model not found"}`, retrypolicy.PermanentConfig},
		{"unrecognized client", 403, "UnrecognizedClientException", `{"message":"The security token included in the request is invalid."}`, retrypolicy.PermanentConfig},
		{"unknown 502", 502, "", `<html>bad gateway</html>`, retrypolicy.Transient},
		{"gateway timeout", 504, "", `gateway timeout`, retrypolicy.UnknownOutcome},
		{"guardrail", 200, "", `{"output":{"message":{"role":"assistant","content":[{"text":"blocked"}]}},"stopReason":"guardrail_intervened","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`, retrypolicy.PermanentInput},
		{"content filtered", 200, "", `{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"content_filtered","usage":{"inputTokens":1,"outputTokens":0,"totalTokens":1}}`, retrypolicy.PermanentInput},
		{"unreadable 200", 200, "", `{"output":`, retrypolicy.UnknownOutcome},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := setup(t, func(w http.ResponseWriter, r *http.Request) { respond(w, tc.status, tc.errType, tc.body) })
			_, err := p.Generate(t.Context(), req("op-7"))
			if c := retrypolicy.Classify(err); c.Class != tc.class {
				t.Fatalf("err %v: class %v, want %v", err, c.Class, tc.class)
			}
			if !strings.Contains(err.Error(), "op-7") {
				t.Errorf("error %q does not name the operation", err)
			}
			if strings.Contains(err.Error(), "Summarise the ledger") {
				t.Errorf("error %q quotes the prompt", err)
			}
		})
	}
}

func TestThrottleRetryAfter(t *testing.T) {
	t.Parallel()
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "5")
		respond(w, 429, "ThrottlingException", `{"message":"slow down"}`)
	})
	_, err := p.Generate(t.Context(), req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient || c.RetryAfter.Seconds() != 5 {
		t.Fatalf("err %v: %+v, want transient with 5s", err, c)
	}
}

func TestSDKRetriesAreOff(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		respond(w, 503, "ServiceUnavailableException", `{"message":"unavailable"}`)
	}))
	t.Cleanup(srv.Close)
	// The client is configured for SDK retries; the provider must not use them.
	p, err := bedrock.NewFromConfig(awsConfig(srv.URL, 3), bedrock.Options{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Generate(t.Context(), req("op"))
	if retrypolicy.Classify(err).Class != retrypolicy.Transient || hits.Load() != 1 {
		t.Fatalf("err %v, server hits %d; want transient after exactly 1 request", err, hits.Load())
	}
}

func TestCancelAfterSendIsUncertain(t *testing.T) {
	t.Parallel()
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The provider's trace hook runs first; then the request is cancelled
	// mid-flight, as a lease deadline or a fenced worker would.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cancel() }})
	_, err := p.Generate(ctx, req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.UnknownOutcome || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v: class %v, want unknown_outcome wrapping context.Canceled", err, c.Class)
	}
}

func TestConnectionResetAfterSendIsUncertain(t *testing.T) {
	t.Parallel()
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	})
	_, err := p.Generate(t.Context(), req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.UnknownOutcome || errors.Is(err, retrypolicy.ErrRequestNotSent) {
		t.Fatalf("err %v: class %v, want unknown_outcome", err, c.Class)
	}
}

func TestNotSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p, err := bedrock.NewFromConfig(awsConfig("http://"+addr, 1), bedrock.Options{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Generate(t.Context(), req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient || !errors.Is(err, retrypolicy.ErrRequestNotSent) {
		t.Fatalf("dial error: %v: class %v, want transient, not sent", err, c.Class)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = p.Generate(ctx, req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient || !errors.Is(err, retrypolicy.ErrRequestNotSent) {
		t.Fatalf("done context: %v: class %v, want transient, not sent", err, c.Class)
	}
}

func TestMissingCredentialsIsMisconfigured(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	cfg := awsConfig(srv.URL, 1)
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("no credentials in this environment")
	})
	p, err := bedrock.NewFromConfig(cfg, bedrock.Options{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Generate(t.Context(), req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.PermanentConfig || hits.Load() != 0 {
		t.Fatalf("err %v: class %v, hits %d; want permanent_config, nothing sent", err, c.Class, hits.Load())
	}
}

func TestInvalidInputAndOptions(t *testing.T) {
	t.Parallel()
	p := setup(t, func(w http.ResponseWriter, r *http.Request) { t.Error("invalid input was sent") })
	_, err := p.Generate(t.Context(), contract.Request{OperationID: "op", Input: json.RawMessage(`{"prompt":"x","top_k":3}`)})
	if retrypolicy.Classify(err).Class != retrypolicy.PermanentInput {
		t.Fatalf("unknown field: %v", err)
	}
	if _, err := bedrock.New(bedrockruntime.NewFromConfig(aws.Config{}), bedrock.Options{}); retrypolicy.Classify(err).Class != retrypolicy.PermanentConfig {
		t.Fatalf("no model: %v", err)
	}
	if _, err := bedrock.New(nil, bedrock.Options{Model: model}); retrypolicy.Classify(err).Class != retrypolicy.PermanentConfig {
		t.Fatalf("no client: %v", err)
	}
}
