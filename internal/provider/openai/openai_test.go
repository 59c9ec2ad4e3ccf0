package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

const testKey = "sk-test-SECRETKEY-0123456789abcdef"

func staticEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

type bundle struct {
	p   *openai.Provider
	srv *httptest.Server
}

func setup(t *testing.T, h http.HandlerFunc, mod ...func(*openai.Options)) bundle {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	opts := openai.Options{
		BaseURL:    srv.URL + "/v1/",
		Model:      "gpt-test",
		Key:        openai.EnvKey("OPENAI_API_KEY", staticEnv(map[string]string{"OPENAI_API_KEY": testKey})),
		HTTPClient: srv.Client(),
	}
	for _, m := range mod {
		m(&opts)
	}
	p, err := openai.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return bundle{p: p, srv: srv}
}

func req(opID string) contract.Request {
	return contract.Request{
		OperationID: opID, Attempt: 1, Kind: contract.KindGenerate,
		Input: json.RawMessage(`{"prompt":"Write a haiku about queues","system":"You are terse","max_tokens":64,"temperature":0.2}`),
	}
}

const okBody = `{"id":"chatcmpl-123","object":"chat.completion","created":1,"model":"gpt-test-2025","choices":[{"index":0,"message":{"role":"assistant","content":"Messages wait in line"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`

func TestGenerateSendsChatCompletion(t *testing.T) {
	t.Parallel()
	var got struct {
		method, path, auth, idem, ctype string
		body                            map[string]any
	}
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path = r.Method, r.URL.Path
		got.auth, got.idem, got.ctype = r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type")
		if err := json.NewDecoder(r.Body).Decode(&got.body); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, okBody)
	})
	res, err := b.p.Generate(t.Context(), req("task-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.method != "POST" || got.path != "/v1/chat/completions" || got.auth != "Bearer "+testKey || got.idem != "task-1" || got.ctype != "application/json" {
		t.Errorf("request %s %s auth-ok=%t idempotency-key=%q content-type=%q", got.method, got.path, got.auth == "Bearer "+testKey, got.idem, got.ctype)
	}
	wantBody := `{"max_tokens":64,"messages":[{"content":"You are terse","role":"system"},{"content":"Write a haiku about queues","role":"user"}],"model":"gpt-test","temperature":0.2}`
	if js, _ := json.Marshal(got.body); string(js) != wantBody {
		t.Errorf("body %s\nwant %s", js, wantBody)
	}
	if res.Provider != "openai" || res.ProviderRef != "chatcmpl-123" {
		t.Errorf("result %+v", res)
	}
	const wantOut = `{"text":"Messages wait in line","model":"gpt-test-2025","stop_reason":"stop","usage":{"input_tokens":12,"output_tokens":5}}`
	if string(res.Output) != wantOut {
		t.Errorf("output %s\nwant %s", res.Output, wantOut)
	}
	if res.Usage == nil || *res.Usage != (contract.Usage{InputTokens: 12, OutputTokens: 5}) || b.p.Model() != "gpt-test" {
		t.Errorf("reported usage %+v, model %q; want 12+5 tokens of gpt-test", res.Usage, b.p.Model())
	}
	if b.p.HonoursIdempotencyKey() {
		t.Error("HonoursIdempotencyKey true by default")
	}
	if _, err := b.p.Lookup(t.Context(), "task-1"); !errors.Is(err, contract.ErrNoReadback) {
		t.Errorf("Lookup = %v, want ErrNoReadback", err)
	}
}

func TestOptionalFieldsOmitted(t *testing.T) {
	t.Parallel()
	var body map[string]json.RawMessage
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&body)
		_, _ = io.WriteString(w, `{"id":"x","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`)
	}, func(o *openai.Options) { o.HonoursIdempotency = true })
	res, err := b.p.Generate(t.Context(), contract.Request{OperationID: "op", Input: json.RawMessage(`{"prompt":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := body["max_tokens"]; ok {
		t.Error("max_tokens sent although unset")
	}
	if _, ok := body["temperature"]; ok {
		t.Error("temperature sent although unset")
	}
	var msgs []map[string]string
	_ = json.Unmarshal(body["messages"], &msgs)
	if len(msgs) != 1 || msgs[0]["role"] != "user" {
		t.Errorf("messages %v, want one user message", msgs)
	}
	var out contract.GenerateOutput
	_ = json.Unmarshal(res.Output, &out)
	if out.Text != "ab" || out.Model != "gpt-test" {
		t.Errorf("output %+v: want content parts joined and the configured model", out)
	}
	if !b.p.HonoursIdempotencyKey() {
		t.Error("HonoursIdempotencyKey false with HonoursIdempotency")
	}
}

func TestStatusMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		class      retrypolicy.Class
		retryAfter time.Duration
	}{
		{"429 retry-after", 429, map[string]string{"Retry-After": "3"}, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, retrypolicy.Transient, 3 * time.Second},
		{"429 retry-after-ms", 429, map[string]string{"Retry-After-Ms": "1500", "Retry-After": "9"}, `{}`, retrypolicy.Transient, 1500 * time.Millisecond},
		{"429 quota", 429, nil, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, retrypolicy.PermanentConfig, 0},
		{"500", 500, nil, `{"error":{"message":"server error","type":"server_error","code":null}}`, retrypolicy.Transient, 0},
		{"502", 502, nil, `bad gateway`, retrypolicy.Transient, 0},
		{"503", 503, map[string]string{"Retry-After": "4"}, `{"error":{"message":"overloaded"}}`, retrypolicy.Transient, 4 * time.Second},
		{"529 overloaded", 529, nil, `{"error":{"type":"overloaded_error"}}`, retrypolicy.Transient, 0},
		{"504 gateway timeout", 504, nil, `gateway timeout`, retrypolicy.UnknownOutcome, 0},
		{"408", 408, nil, ``, retrypolicy.Transient, 0},
		{"400 context length", 400, nil, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, retrypolicy.PermanentInput, 0},
		{"400 content policy", 400, nil, `{"error":{"message":"rejected by safety system","type":"invalid_request_error","code":"content_policy_violation"}}`, retrypolicy.PermanentInput, 0},
		{"422", 422, nil, `{}`, retrypolicy.PermanentInput, 0},
		{"401", 401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, retrypolicy.PermanentConfig, 0},
		{"403", 403, nil, `{"error":{"message":"region not supported"}}`, retrypolicy.PermanentConfig, 0},
		{"404 model", 404, nil, `{"error":{"message":"The model does not exist","code":"model_not_found"}}`, retrypolicy.PermanentConfig, 0},
		{"200 content filter", 200, nil, `{"id":"c","choices":[{"message":{"content":null},"finish_reason":"content_filter"}]}`, retrypolicy.PermanentInput, 0},
		{"200 not json", 200, nil, `<html>oops</html>`, retrypolicy.UnknownOutcome, 0},
		{"200 no choices", 200, nil, `{"id":"c","choices":[]}`, retrypolicy.UnknownOutcome, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("X-Request-Id", "req-abc")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})
			_, err := b.p.Generate(t.Context(), req("op"))
			c := retrypolicy.Classify(err)
			if c.Class != tc.class || c.RetryAfter != tc.retryAfter {
				t.Fatalf("err %v: class %v retry-after %v; want %v %v", err, c.Class, c.RetryAfter, tc.class, tc.retryAfter)
			}
			if tc.status != 200 {
				var se *retrypolicy.StatusError
				if !errors.As(err, &se) || se.StatusCode != tc.status {
					t.Errorf("no StatusError %d in %v", tc.status, err)
				}
				if !strings.Contains(err.Error(), "req-abc") || !strings.Contains(err.Error(), "operation op") {
					t.Errorf("error %q lacks the operation or request id", err)
				}
			}
		})
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		// A hostile or careless server echoes the key and the prompt.
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"message":"bad key %s for prompt %s","code":"x"}}`, testKey, "Write a haiku about queues")
	})
	_, err400 := b.p.Generate(t.Context(), req("op"))

	b401 := setup(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","code":"invalid_api_key"}}`, testKey)
	})
	_, err401 := b401.p.Generate(t.Context(), req("op"))

	secret := openai.SecretsManagerKey(fakeSecrets{value: testKey}, "arn:aws:secretsmanager:us-east-1:1:secret:k", 0)
	if k, err := secret.APIKey(t.Context()); err != nil || k != testKey {
		t.Fatalf("secret key = %v", err)
	}
	withSecret, err := openai.New(openai.Options{Model: "m", Key: secret})
	if err != nil {
		t.Fatal(err)
	}
	opts := openai.Options{Model: "m", Key: secret}

	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "provider", b.p, "secret", secret, "opts", opts, "err", err400)

	var printed []string
	for _, v := range []any{err400, err401, b.p, withSecret, secret, opts, &opts} {
		for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			printed = append(printed, fmt.Sprintf(f, v))
		}
	}
	printed = append(printed, logs.String())
	for _, s := range printed {
		if strings.Contains(s, testKey) || strings.Contains(s, fmt.Sprintf("%x", testKey)) || strings.Contains(s, "SECRETKEY") {
			t.Fatalf("key printed: %s", s)
		}
		if strings.Contains(s, "haiku") {
			t.Fatalf("prompt printed: %s", s)
		}
	}
	if !strings.Contains(err400.Error(), "withheld") {
		t.Errorf("400 error %q: want the quoting message withheld", err400)
	}
	if strings.Contains(err401.Error(), "Incorrect") {
		t.Errorf("401 error %q keeps the server's message", err401)
	}
}

type fakeSecrets struct{ value string }

func (f fakeSecrets) GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.value)}, nil
}

func TestCancelAfterSendIsUncertain(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done() // the generation is "in progress" until the client hangs up
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Cancel as soon as the request is written (the provider's own trace
	// hook runs before this one), e.g. a fenced worker or a lease deadline.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cancel() }})
	_, err := b.p.Generate(ctx, req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.UnknownOutcome || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v class %v; want unknown_outcome wrapping context.Canceled", err, c.Class)
	}
	if errors.Is(err, retrypolicy.ErrRequestNotSent) {
		t.Error("a written request is reported as not sent")
	}
}

func TestDoneContextIsNotSent(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.p.Generate(ctx, req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient || !errors.Is(err, retrypolicy.ErrRequestNotSent) || hits.Load() != 0 {
		t.Fatalf("err %v class %v hits %d; want transient, not sent", err, c.Class, hits.Load())
	}
}

func TestDialErrorIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p, err := openai.New(openai.Options{BaseURL: "http://" + addr + "/v1", Model: "m", Key: openai.EnvKey("K", staticEnv(map[string]string{"K": testKey}))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Generate(t.Context(), req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient || !errors.Is(err, retrypolicy.ErrRequestNotSent) {
		t.Fatalf("err %v class %v; want transient, not sent", err, c.Class)
	}
}

// A connection dropped after the request was read must surface as uncertain
// and must not be replayed by net/http (which replays POSTs that carry an
// Idempotency-Key header when it can rewind the body).
func TestDroppedConnectionIsNotReplayed(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		_, _ = io.ReadAll(r.Body)
		if n == 1 {
			_, _ = io.WriteString(w, okBody) // leaves a keep-alive connection to reuse
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	})
	if _, err := b.p.Generate(t.Context(), req("op-1")); err != nil {
		t.Fatal(err)
	}
	_, err := b.p.Generate(t.Context(), req("op-2"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.UnknownOutcome {
		t.Fatalf("err %v class %v; want unknown_outcome", err, c.Class)
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("server saw %d requests, want 2: the dropped request was replayed", n)
	}
}

func TestEnvKeyMissing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { t.Error("request sent without a key") },
		func(o *openai.Options) { o.Key = openai.EnvKey("MY_KEY", staticEnv(nil)) })
	_, err := b.p.Generate(t.Context(), req("op"))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.PermanentConfig || !strings.Contains(err.Error(), "MY_KEY") {
		t.Fatalf("err %v class %v; want permanent_config naming MY_KEY", err, c.Class)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	key := openai.EnvKey("K", nil)
	for name, o := range map[string]openai.Options{
		"no model":        {Key: key},
		"no key":          {Model: "m"},
		"bad scheme":      {Model: "m", Key: key, BaseURL: "ftp://x/v1"},
		"relative":        {Model: "m", Key: key, BaseURL: "/v1"},
		"userinfo in url": {Model: "m", Key: key, BaseURL: "https://user:pw@x/v1"},
	} {
		if _, err := openai.New(o); err == nil || retrypolicy.Classify(err).Class != retrypolicy.PermanentConfig {
			t.Errorf("%s: err %v, want permanent_config", name, err)
		}
	}
}

// secretsServer speaks the Secrets Manager JSON protocol (GetSecretValue
// only) for the real SDK client.
type secretsServer struct {
	mu     sync.Mutex
	values []string // successive secret versions; the last one repeats
	fail   string   // error code to answer with, if set
	calls  int
}

func (s *secretsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	var in struct{ SecretId string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"__type":"UnknownOperationException"}`)
		return
	}
	if s.fail != "" {
		w.WriteHeader(400)
		if s.fail == "InternalServiceError" {
			w.WriteHeader(500)
		}
		fmt.Fprintf(w, `{"__type":%q,"Message":"no"}`, s.fail)
		return
	}
	v := s.values[min(s.calls-1, len(s.values)-1)]
	_ = json.NewEncoder(w).Encode(map[string]string{"ARN": in.SecretId, "Name": "k", "SecretString": v})
}

func (s *secretsServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func secretsClient(t *testing.T, h http.Handler) *secretsmanager.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return secretsmanager.NewFromConfig(aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1,
		BaseEndpoint:     aws.String(srv.URL),
		HTTPClient:       srv.Client(),
	})
}

func TestSecretsManagerKeyCachedAndRotated(t *testing.T) {
	t.Parallel()
	const oldKey, newKey = "sk-old-1111111111", "sk-new-2222222222"
	sm := &secretsServer{values: []string{oldKey, `{"api_key":"` + newKey + `"}`}}
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:llm-key"
	var llmHits atomic.Int32
	b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		llmHits.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+newKey {
			w.WriteHeader(401)
			_, _ = io.WriteString(w, `{"error":{"code":"invalid_api_key"}}`)
			return
		}
		_, _ = io.WriteString(w, okBody)
	}, func(o *openai.Options) { o.Key = openai.SecretsManagerKey(secretsClient(t, sm), arn, time.Hour) })

	// The cached key was rotated: 401, re-read, one more send.
	if _, err := b.p.Generate(t.Context(), req("op-1")); err != nil {
		t.Fatal(err)
	}
	if sm.count() != 2 || llmHits.Load() != 2 {
		t.Fatalf("secret reads %d, LLM requests %d; want 2 and 2", sm.count(), llmHits.Load())
	}
	// Cached from now on.
	for _, id := range []string{"op-2", "op-3"} {
		if _, err := b.p.Generate(t.Context(), req(id)); err != nil {
			t.Fatal(err)
		}
	}
	if sm.count() != 2 {
		t.Errorf("secret reads %d after cached calls, want 2", sm.count())
	}
}

func TestSecretsManagerErrors(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]retrypolicy.Class{
		"ResourceNotFoundException": retrypolicy.PermanentConfig,
		"AccessDeniedException":     retrypolicy.PermanentConfig,
		"InternalServiceError":      retrypolicy.Transient,
	} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			key := openai.SecretsManagerKey(secretsClient(t, &secretsServer{fail: code}), "arn:x", 0)
			_, err := key.APIKey(t.Context())
			if c := retrypolicy.Classify(err); c.Class != want {
				t.Fatalf("err %v class %v, want %v", err, c.Class, want)
			}
		})
	}
	key := openai.SecretsManagerKey(secretsClient(t, &secretsServer{values: []string{`{"token":"x"}`}}), "arn:x", 0)
	if _, err := key.APIKey(t.Context()); retrypolicy.Classify(err).Class != retrypolicy.PermanentConfig || !strings.Contains(err.Error(), "api_key") {
		t.Fatalf("JSON secret without api_key: %v", err)
	}
}
