//go:build linux

package rietest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// invoker calls a function with a raw event and returns its raw response,
// or the Lambda error document for a function error.
type invoker func(ctx context.Context, payload []byte) ([]byte, error)

// lambdaError is the response document of a function error.
func lambdaError(err error) []byte {
	typ := reflect.TypeOf(err)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	b, _ := json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": typ.Name()})
	return b
}

// handle adapts a typed handler the way lambda.Start does.
func handle[E, R any](fn func(context.Context, E) (R, error)) invoker {
	return func(ctx context.Context, payload []byte) ([]byte, error) {
		var ev E
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		resp, err := fn(ctx, ev)
		if err != nil {
			return lambdaError(err), nil
		}
		return json.Marshal(resp)
	}
}

// inProcess builds the three handlers as functions/*/main.go build them,
// from the same template environment, on e's resources.
func inProcess(t *testing.T, e *testenv.Env, env map[string]map[string]string, idKey ledger.SecretKey) map[string]invoker {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: env["SubmitFunction"]["TASKS_TABLE"], ReviewTable: env["SubmitFunction"]["REVIEW_TABLE"],
		WatchTable: env["SubmitFunction"]["WATCH_TABLE"], IDKey: idKey})
	if err != nil {
		t.Fatal(err)
	}
	sender := &dispatch.Sender{SQS: e.SQS, QueueURL: env["SubmitFunction"]["TASK_QUEUE_URL"]}
	quiet := metrics.NewWriter(io.Discard)
	newProvider := func(fn string) provider.Provider {
		cfg := provider.ConfigFromEnv(func(k string) string { return env[fn][k] })
		cfg.AWS = &e.AWS
		p, err := provider.New(ctx, cfg)
		if err != nil {
			t.Fatalf("%s provider: %v", fn, err)
		}
		return p
	}
	lease := worker.DefaultLease
	if v := env["WorkerFunction"]["LEASE_SECONDS"]; v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatalf("LEASE_SECONDS=%q", v)
		}
		lease = time.Duration(n) * time.Second
	}
	// The claim-check store each function's PAYLOAD_BUCKET names.
	payloads := func(fn string) *payload.Store {
		st, err := lambdaenv.Payloads(e.AWS, func(k string) string { return env[fn][k] })
		if err != nil || st == nil {
			t.Fatalf("%s payload store: %v (PAYLOAD_BUCKET %q)", fn, err, env[fn]["PAYLOAD_BUCKET"])
		}
		return st
	}
	se := env["SubmitFunction"]
	auth, err := api.ParseAuthConfig(se["AUTH_MODE"], se["OIDC_ISSUER"], se["OIDC_CLIENT_ID"], se["OIDC_AUTHORIZATION_ENDPOINT"])
	if err != nil {
		t.Fatal(err)
	}
	submit := &api.Handler{
		Ledger:         l,
		Dispatch:       sender,
		Metrics:        quiet,
		AllowedOrigins: api.ParseOrigins(se["ALLOWED_ORIGINS"]),
		Auth:           auth,
		Payloads:       payloads("SubmitFunction"),
	}
	work := &worker.Handler{
		Ledger:   l,
		Provider: newProvider("WorkerFunction"),
		SQS:      e.SQS,
		QueueURL: env["WorkerFunction"]["TASK_QUEUE_URL"],
		Policy:   retrypolicy.Default(),
		Lease:    lease,
		Metrics:  quiet,
		Payloads: payloads("WorkerFunction"),
	}
	recon := &reconciler.Handler{
		Ledger:   l,
		Dispatch: &dispatch.Sender{SQS: e.SQS, QueueURL: env["ReconcilerFunction"]["TASK_QUEUE_URL"]},
		DLQ:      e.SQS,
		DLQURL:   env["ReconcilerFunction"]["DEAD_LETTER_QUEUE_URL"],
		Provider: newProvider("ReconcilerFunction"),
		Metrics:  quiet,
		Payloads: payloads("ReconcilerFunction"),
	}
	return map[string]invoker{
		"SubmitFunction":     handle(submit.Handle),
		"WorkerFunction":     handle(work.Handle),
		"ReconcilerFunction": handle(recon.Handle),
	}
}

// step is one event sent to both copies.
type step struct {
	name  string
	fn    string // logical id
	event string // file in events/
	// before prepares both copies (optional).
	before func(t *testing.T)
	// edit adapts the sample (substitutes ids, keys).
	edit func(ev map[string]any)
	// check asserts on the normalised response (both copies, once equal).
	check func(t *testing.T, resp map[string]any)
}

func TestArtifactsMatchInProcess(t *testing.T) {
	start := time.Now()
	root := moduleRoot(t)
	// RIE and the bootstraps build at the same time (two go commands).
	gotool, gobin, binDir := goTool(t), t.TempDir(), t.TempDir()
	var rie string
	var rieErr error
	rieDone := make(chan struct{})
	go func() { defer close(rieDone); rie, rieErr = installRIE(gotool, gobin) }()
	bins, buildErr := buildBootstraps(gotool, root, binDir)
	<-rieDone
	if rieErr != nil {
		unavailable(t, "%v", rieErr)
	}
	if buildErr != nil {
		t.Fatalf("build the bootstraps: %v", buildErr)
	}
	t.Logf("aws-lambda-rie and bootstraps ready in %v", time.Since(start).Round(time.Millisecond))

	tpl := stack.MustLoadDefault()
	// The samples come through a Cognito JWT authorizer: deploy as
	// AuthMode=jwt with that issuer and client.
	vals, err := tpl.Values(map[string]string{"AuthMode": "jwt",
		"JwtIssuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab12Cd34E", "JwtAudience": "4f1k2j3h4g5f6d7s8a9p0o1i2u"})
	if err != nil {
		t.Fatal(err)
	}
	fns := tpl.Functions()
	remoteEnv := testenv.New(t, "kumo")
	localEnv := testenv.New(t, "kumo")
	// The task id key: a Secrets Manager secret on the emulator for the
	// bootstrap, the same value in process, so both derive the same ids.
	idKey := ledger.SecretKey("rietest-task-id-key-0123456789abcdefghij")
	refsOf := func(e *testenv.Env) map[string]string {
		out, err := secretsmanager.NewFromConfig(e.AWS).CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
			Name: aws.String(testenv.UniquePrefix() + "-TaskIdKeySecret"), SecretString: aws.String(string(idKey))})
		if err != nil {
			t.Fatalf("create the task id key secret: %v", err)
		}
		return map[string]string{"TasksTable": e.Names.TasksTable, "ReviewTable": e.Names.ReviewTable, "WatchTable": e.Names.WatchTable, "TaskQueue": e.Names.TaskQueueURL,
			"TaskDeadLetterQueue": e.Names.DeadLetterQueueURL, "TaskIdKeySecret": *out.ARN, "PayloadBucket": e.Names.PayloadBucket,
			// Streamed replies: the worker lists a task's subscribers on
			// the emulator's connections table (none subscribe here, so
			// nothing is posted to the named WebSocket API).
			"ConnectionsTable": e.Names.ConnectionsTable, "StreamApi": "rietest", "StreamStage": "live",
			// The delivery bus: named in the environment, never called by
			// these samples (no deliver task among them).
			"DeliveryEventBus.Arn": "arn:aws:events:us-east-1:000000000000:event-bus/rietest-deliveries"}
	}
	remoteRefs, localRefs := refsOf(remoteEnv), refsOf(localEnv)

	remote := map[string]invoker{}
	localEnvs := map[string]map[string]string{}
	for logical, dir := range functions {
		fn, ok := fns[logical]
		if !ok {
			t.Fatalf("template has no %s", logical)
		}
		f := startRIE(t, rie, bins[dir], fn, functionEnv(t, fn, vals, remoteRefs), remoteEnv.Endpoint)
		remote[logical] = f.call
		localEnvs[logical] = functionEnv(t, fn, vals, localRefs)
	}
	local := inProcess(t, localEnv, localEnvs, idKey)

	// Ids: task ids derive from (scope, Idempotency-Key) under the same
	// key, identical in both copies. The samples' own ids are replaced by the ones the submits
	// return, so the sequence does not depend on how the samples were made.
	var firstID, regenID string
	batchIDs := make([]string, 3)
	const sampleID = "t_b47hcnamh6mny5n6k3hcki4y3m"

	steps := []step{
		{name: "submit new", fn: "SubmitFunction", event: "apigw-submit-new.json",
			check: func(t *testing.T, r map[string]any) { firstID = wantTask(t, r, 202, "queued") }},
		{name: "submit replay", fn: "SubmitFunction", event: "apigw-submit-replay.json",
			check: func(t *testing.T, r map[string]any) {
				if id := wantTask(t, r, 200, "queued"); id != firstID {
					t.Errorf("replay returned %s, want %s", id, firstID)
				}
				if h := header(r, "Idempotent-Replayed"); h != "true" {
					t.Errorf("Idempotent-Replayed = %q", h)
				}
			}},
		{name: "submit mismatch", fn: "SubmitFunction", event: "apigw-submit-mismatch.json",
			check: func(t *testing.T, r map[string]any) { wantStatus(t, r, 422) }},
		{name: "get task", fn: "SubmitFunction", event: "apigw-get-task.json",
			edit:  replaceID(sampleID, &firstID),
			check: func(t *testing.T, r map[string]any) { wantTask(t, r, 200, "queued") }},
		{name: "get unknown task", fn: "SubmitFunction", event: "apigw-get-task.json",
			edit:  replaceID(sampleID, ptr("t_aaaaaaaaaaaaaaaaaaaaaaaaaa")),
			check: func(t *testing.T, r map[string]any) { wantStatus(t, r, 404) }},
		{name: "regenerate", fn: "SubmitFunction", event: "apigw-regenerate.json",
			edit:  replaceID(sampleID, &firstID),
			check: func(t *testing.T, r map[string]any) { regenID = wantTask(t, r, 202, "queued") }},
		{name: "cancel", fn: "SubmitFunction", event: "apigw-cancel.json",
			edit:  replaceID(sampleID, &firstID),
			check: func(t *testing.T, r map[string]any) { wantTask(t, r, 200, "cancelled") }},
		{name: "cancel again (idempotent)", fn: "SubmitFunction", event: "apigw-cancel.json",
			edit:  replaceID(sampleID, &firstID),
			check: func(t *testing.T, r map[string]any) { wantTask(t, r, 200, "cancelled") }},
	}
	for i := range batchIDs {
		steps = append(steps, step{
			name: fmt.Sprintf("submit batch task %d", i), fn: "SubmitFunction", event: "apigw-submit-new.json",
			edit: func(ev map[string]any) {
				ev["headers"].(map[string]any)["idempotency-key"] = fmt.Sprintf("rietest-batch-%d", i)
				ev["body"] = fmt.Sprintf(`{"kind":"generate","input":{"prompt":"Batch task %d.","max_tokens":32}}`, i)
			},
			check: func(t *testing.T, r map[string]any) { batchIDs[i] = wantTask(t, r, 202, "queued") },
		})
	}
	steps = append(steps,
		step{name: "sqs batch", fn: "WorkerFunction", event: "sqs-batch.json",
			edit: func(ev map[string]any) {
				for i, rec := range ev["Records"].([]any) {
					rec.(map[string]any)["body"] = fmt.Sprintf(`{"task_id":%q}`, batchIDs[i])
				}
			},
			check: wantNoItemFailures},
		step{name: "sqs duplicate", fn: "WorkerFunction", event: "sqs-duplicate.json",
			edit: func(ev map[string]any) {
				for _, rec := range ev["Records"].([]any) {
					rec.(map[string]any)["body"] = fmt.Sprintf(`{"task_id":%q}`, regenID)
				}
			},
			check: wantNoItemFailures},
		step{name: "sqs poison", fn: "WorkerFunction", event: "sqs-poison.json", check: wantNoItemFailures},
	)
	for i := range batchIDs {
		steps = append(steps, step{
			name: fmt.Sprintf("get batch task %d", i), fn: "SubmitFunction", event: "apigw-get-task.json",
			edit:  replaceID(sampleID, &batchIDs[i]),
			check: func(t *testing.T, r map[string]any) { wantTask(t, r, 200, "completed") },
		})
	}
	steps = append(steps,
		step{name: "get regenerated task", fn: "SubmitFunction", event: "apigw-get-task.json",
			edit:  replaceID(sampleID, &regenID),
			check: func(t *testing.T, r map[string]any) { wantTask(t, r, 200, "completed") }},
		step{name: "scheduler tick", fn: "ReconcilerFunction", event: "scheduler-tick.json",
			// A poison message in each dead-letter queue: the run drains it
			// into the review table.
			before: func(t *testing.T) {
				for _, e := range []*testenv.Env{remoteEnv, localEnv} {
					if _, err := e.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
						QueueUrl: &e.Names.DeadLetterQueueURL, MessageBody: aws.String("not a task reference"),
					}); err != nil {
						t.Fatalf("send to the dead-letter queue: %v", err)
					}
				}
			},
			check: func(t *testing.T, r map[string]any) {
				if n, _ := r["poison_messages"].(float64); n != 1 {
					t.Errorf("poison_messages = %v, want 1 (the dead letter)", r["poison_messages"])
				}
				if n, _ := r["open_reviews"].(float64); n != 3 {
					t.Errorf("open_reviews = %v, want 3 (two poison records, one dead letter)", r["open_reviews"])
				}
			}},
	)

	for _, s := range steps {
		if s.before != nil {
			s.before(t)
		}
		ev := readEvent(t, root, s.event)
		if s.edit != nil {
			s.edit(ev)
		}
		payload, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		fn := fns[s.fn]
		gotRemote := invoke(t, remote[s.fn], fn, payload, "RIE", s.name)
		gotLocal := invoke(t, local[s.fn], fn, payload, "in-process", s.name)
		nr, nl := normalise(t, gotRemote), normalise(t, gotLocal)
		if !reflect.DeepEqual(nr, nl) {
			t.Fatalf("%s (%s): responses differ\nRIE:        %s\nin-process: %s", s.name, s.event, pretty(nr), pretty(nl))
		}
		if s.check != nil {
			s.check(t, nr.(map[string]any))
		}
		if t.Failed() {
			t.Fatalf("%s (%s): response %s", s.name, s.event, pretty(nr))
		}
	}
	t.Logf("%d steps matched; total %v", len(steps), time.Since(start).Round(time.Millisecond))
}

func invoke(t *testing.T, call invoker, fn stack.Function, payload []byte, where, name string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fn.Timeout+10*time.Second)
	defer cancel()
	// The in-process call gets what Lambda gives a handler.
	ictx, icancel := context.WithTimeout(ctx, fn.Timeout)
	defer icancel()
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{AwsRequestID: "rietest-" + strings.ReplaceAll(name, " ", "-")})
	out, err := call(ictx, payload)
	if err != nil {
		t.Fatalf("%s: %s invoke: %v", name, where, err)
	}
	return out
}

// Normalisation: values that legitimately differ between two runs (clock
// readings). Everything else, task ids, correlation ids, results and
// provider references included, must be equal.
var (
	rfc3339     = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)
	volatileKey = map[string]string{"duration_ms": "<duration>"}
)

// normalise parses a response (an API Gateway response's body too) and
// reduces run-dependent values to placeholders.
func normalise(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, raw)
	}
	if m, ok := v.(map[string]any); ok {
		if body, ok := m["body"].(string); ok && body != "" {
			var parsed any
			if json.Unmarshal([]byte(body), &parsed) == nil {
				m["body"] = parsed
			}
		}
	}
	return walk("", v)
}

func walk(key string, v any) any {
	if p, ok := volatileKey[key]; ok && v != nil && v != "" {
		return p
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if key == "oldest_age_seconds" {
				out[k] = "<age>"
				continue
			}
			out[k] = walk(k, e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = walk(key, e)
		}
		return out
	case string:
		if rfc3339.MatchString(x) {
			return "<time>"
		}
	}
	return v
}

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "            ", "  ")
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// replaceID substitutes *to for from everywhere in an API Gateway event
// (path, raw path, path parameters).
func replaceID(from string, to *string) func(map[string]any) {
	return func(ev map[string]any) {
		b, _ := json.Marshal(ev)
		s := strings.ReplaceAll(string(b), from, *to)
		clear(ev)
		_ = json.Unmarshal([]byte(s), &ev)
	}
}

func header(r map[string]any, name string) string {
	h, _ := r["headers"].(map[string]any)
	for k, v := range h {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}

func wantStatus(t *testing.T, r map[string]any, code int) {
	t.Helper()
	if got, _ := r["statusCode"].(float64); int(got) != code {
		t.Errorf("statusCode = %v, want %d", r["statusCode"], code)
	}
}

// wantTask checks an API response carrying a task view and returns its id.
func wantTask(t *testing.T, r map[string]any, code int, state string) string {
	t.Helper()
	wantStatus(t, r, code)
	body, _ := r["body"].(map[string]any)
	if body["state"] != state {
		t.Errorf("task state = %v, want %s", body["state"], state)
	}
	id, _ := body["task_id"].(string)
	if !ledger.ValidTaskID(id) {
		t.Errorf("task_id %q is not a task id", id)
	}
	return id
}

func wantNoItemFailures(t *testing.T, r map[string]any) {
	t.Helper()
	if _, isErr := r["errorMessage"]; isErr {
		t.Errorf("function error: %v", r)
		return
	}
	f, ok := r["batchItemFailures"].([]any)
	if !ok || len(f) != 0 {
		t.Errorf("batchItemFailures = %v, want []", r["batchItemFailures"])
	}
}
