package stack

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// realTemplate loads the repository's template.yaml.
func realTemplate(t *testing.T) *Template {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	p, err := findFrom(wd, "")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestFind(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := findFrom(deep, ""); err == nil {
		t.Error("no go.mod above: want error")
	}
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod")
	if _, err := findFrom(deep, ""); err == nil || !strings.Contains(err.Error(), "no template.yaml") {
		t.Errorf("go.mod without template.yaml: err = %v", err)
	}
	write("template.yaml")
	if got, err := findFrom(deep, ""); err != nil || got != filepath.Join(root, "template.yaml") {
		t.Errorf("findFrom = %q, %v", got, err)
	}
	override := filepath.Join(root, "other.yaml")
	if _, err := findFrom(deep, override); err == nil {
		t.Error("missing override: want error")
	}
	write("other.yaml")
	if got, err := findFrom(deep, override); err != nil || got != override {
		t.Errorf("findFrom(override) = %q, %v", got, err)
	}
}

func TestTemplateTables(t *testing.T) {
	t.Parallel()
	tmpl := realTemplate(t)

	// ExampleDestinationTable is deployed only with DeployExampleDestination
	// (Create skips it under the defaults: create_test.go).
	if got, want := tmpl.LogicalIDs(typeTable), []string{"ConnectionsTable", "ExampleDestinationTable", "ReviewTable", "TasksTable", "WatchTable"}; !slices.Equal(got, want) {
		t.Fatalf("tables = %v, want %v", got, want)
	}

	ev := newEvaluator(tmpl, "us-east-1", "x")
	input := func(id string) (*dynamodb.CreateTableInput, *ttlSpec) {
		props, ok := tmpl.Resource(id)
		if !ok {
			t.Fatalf("no %s", id)
		}
		v, err := ev.eval(props, id)
		if err != nil {
			t.Fatal(err)
		}
		in, ttl, err := tableInput("x-"+id, id, v.(map[string]any))
		if err != nil {
			t.Fatal(err)
		}
		return in, ttl
	}

	in, ttl := input("TasksTable")
	if in.BillingMode != ddbtypes.BillingModePayPerRequest {
		t.Errorf("TasksTable billing = %q", in.BillingMode)
	}
	if got := keyString(in.KeySchema); got != "[task_id:HASH]" {
		t.Errorf("TasksTable key = %s", got)
	}
	gsi := map[string]ddbtypes.GlobalSecondaryIndex{}
	for _, g := range in.GlobalSecondaryIndexes {
		gsi[aws.ToString(g.IndexName)] = g
	}
	if c, ok := gsi["by_conversation"]; !ok || keyString(c.KeySchema) != "[conv_key:HASH created_ms:RANGE]" || c.Projection.ProjectionType != ddbtypes.ProjectionTypeKeysOnly {
		t.Errorf("by_conversation = %+v, want (conv_key, created_ms) KEYS_ONLY", c)
	}
	g := gsi["by_state"]
	// by_owner (GET /tasks) holds only what the create's put writes and
	// nothing later changes: the caller's scope, created_ms and kind.
	if o, ok := gsi["by_owner"]; !ok || keyString(o.KeySchema) != "[scope:HASH created_ms:RANGE]" ||
		o.Projection.ProjectionType != ddbtypes.ProjectionTypeInclude || !slices.Equal(o.Projection.NonKeyAttributes, []string{"kind"}) {
		t.Errorf("by_owner = %+v, want (scope, created_ms) INCLUDE kind", o)
	}
	if aws.ToString(g.IndexName) != "by_state" || keyString(g.KeySchema) != "[state_shard:HASH due_at:RANGE]" {
		t.Errorf("by_state = %s %s", aws.ToString(g.IndexName), keyString(g.KeySchema))
	}
	wantNonKey := []string{"max_attempts", "budget_start_ms", "kind", "correlation_id", "deadline_ms", "dispatches"}
	if g.Projection.ProjectionType != ddbtypes.ProjectionTypeInclude || !slices.Equal(g.Projection.NonKeyAttributes, wantNonKey) {
		t.Errorf("by_state projection = %s %v", g.Projection.ProjectionType, g.Projection.NonKeyAttributes)
	}
	defs := map[string]ddbtypes.ScalarAttributeType{}
	for _, d := range in.AttributeDefinitions {
		defs[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	if want := map[string]ddbtypes.ScalarAttributeType{"task_id": "S", "state_shard": "S", "due_at": "N", "conv_key": "S", "created_ms": "N", "scope": "S"}; !reflect.DeepEqual(defs, want) {
		t.Errorf("TasksTable attribute definitions = %v", defs)
	}
	if ttl == nil || *ttl != (ttlSpec{attribute: "expires_at", enabled: true}) {
		t.Errorf("TasksTable TTL = %+v", ttl)
	}

	in, ttl = input("ReviewTable")
	if got := keyString(in.KeySchema); got != "[task_id:HASH]" {
		t.Errorf("ReviewTable key = %s", got)
	}
	g = in.GlobalSecondaryIndexes[0]
	if aws.ToString(g.IndexName) != "open_reviews" || keyString(g.KeySchema) != "[review_status:HASH dead_lettered_at:RANGE]" ||
		g.Projection.ProjectionType != ddbtypes.ProjectionTypeAll {
		t.Errorf("open_reviews = %s %s %s", aws.ToString(g.IndexName), keyString(g.KeySchema), g.Projection.ProjectionType)
	}
	if ttl == nil || ttl.attribute != "expires_at" || !ttl.enabled {
		t.Errorf("ReviewTable TTL = %+v", ttl)
	}

	// The watch table (pkg/ledger/watch.go): pk and sk strings, no index;
	// TTL deletes a watch item past its retention.
	in, ttl = input("WatchTable")
	if got := keyString(in.KeySchema); got != "[pk:HASH sk:RANGE]" || len(in.GlobalSecondaryIndexes) != 0 {
		t.Errorf("WatchTable key = %s, indexes %d", got, len(in.GlobalSecondaryIndexes))
	}
	if in.BillingMode != ddbtypes.BillingModePayPerRequest {
		t.Errorf("WatchTable billing = %q", in.BillingMode)
	}
	if ttl == nil || *ttl != (ttlSpec{attribute: "expires_at", enabled: true}) {
		t.Errorf("WatchTable TTL = %+v", ttl)
	}

	// Deployed-only settings are in the template even though Create skips them.
	for _, id := range []string{"TasksTable", "ReviewTable", "WatchTable"} {
		p, _ := tmpl.Resource(id)
		if !reflect.DeepEqual(p["PointInTimeRecoverySpecification"], map[string]any{"PointInTimeRecoveryEnabled": true}) ||
			!reflect.DeepEqual(p["SSESpecification"], map[string]any{"SSEEnabled": true}) {
			t.Errorf("%s: PITR/SSE not enabled: %v %v", id, p["PointInTimeRecoverySpecification"], p["SSESpecification"])
		}
	}
}

func TestTemplateQueues(t *testing.T) {
	t.Parallel()
	tmpl := realTemplate(t)

	if got, want := tmpl.LogicalIDs(typeQueue), []string{"TaskDeadLetterQueue", "TaskQueue"}; !slices.Equal(got, want) {
		t.Fatalf("queues = %v, want %v", got, want)
	}
	order, err := tmpl.creationOrder()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Index(order, "TaskDeadLetterQueue") > slices.Index(order, "TaskQueue") {
		t.Errorf("creation order %v: DLQ must come before the queue that redrives to it", order)
	}

	q, _ := tmpl.Resource("TaskQueue")
	for k, want := range map[string]int{"VisibilityTimeout": 900, "MessageRetentionPeriod": 345600, "ReceiveMessageWaitTimeSeconds": 20} {
		if got, ok := toInt(q[k]); !ok || got != want {
			t.Errorf("TaskQueue %s = %v, want %d", k, q[k], want)
		}
	}
	want := map[string]any{"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{"TaskDeadLetterQueue", "Arn"}}, "maxReceiveCount": 10}
	if !reflect.DeepEqual(q["RedrivePolicy"], want) {
		t.Errorf("TaskQueue RedrivePolicy = %#v", q["RedrivePolicy"])
	}
	dlq, _ := tmpl.Resource("TaskDeadLetterQueue")
	if got, _ := toInt(dlq["MessageRetentionPeriod"]); got != 1209600 {
		t.Errorf("DLQ retention = %v", dlq["MessageRetentionPeriod"])
	}
	for _, p := range []map[string]any{q, dlq} {
		if p["SqsManagedSseEnabled"] != true {
			t.Errorf("SqsManagedSseEnabled = %v", p["SqsManagedSseEnabled"])
		}
	}

	if got := tmpl.QueueVisibilityTimeout("TaskQueue"); got != 900*time.Second {
		t.Errorf("QueueVisibilityTimeout(TaskQueue) = %v", got)
	}
	if got := tmpl.QueueVisibilityTimeout("TaskDeadLetterQueue"); got != 30*time.Second {
		t.Errorf("QueueVisibilityTimeout(DLQ) = %v, want the SQS default", got)
	}
	if got := tmpl.QueueVisibilityTimeout("TasksTable"); got != 0 {
		t.Errorf("QueueVisibilityTimeout(table) = %v", got)
	}
}

func TestTemplateFunctions(t *testing.T) {
	t.Parallel()
	tmpl := realTemplate(t)

	fns := tmpl.Functions()
	if got := slices.Sorted(maps.Keys(fns)); !slices.Equal(got, []string{"ExampleDestinationFunction", "ReconcilerFunction", "StreamFunction", "SubmitFunction", "WorkerFunction"}) {
		t.Fatalf("functions = %v", got)
	}
	timeouts := map[string]time.Duration{"SubmitFunction": 10 * time.Second, "WorkerFunction": 140 * time.Second, "ReconcilerFunction": time.Minute,
		"ExampleDestinationFunction": 10 * time.Second, "StreamFunction": 10 * time.Second}
	for id, f := range fns {
		if f.Runtime != "provided.al2023" || !slices.Equal(f.Architectures, []string{"arm64"}) || f.MemorySize != 256 {
			t.Errorf("%s: globals not merged: %+v", id, f)
		}
		if f.Timeout != timeouts[id] {
			t.Errorf("%s: Timeout = %v, want %v", id, f.Timeout, timeouts[id])
		}
		for _, k := range []string{"TASKS_TABLE", "REVIEW_TABLE", "TASK_QUEUE_URL", "LOG_LEVEL"} {
			if _, ok := f.Env[k]; !ok {
				t.Errorf("%s: env %s missing", id, k)
			}
		}
		// Permissions come from the function's own execution role (Role);
		// internal/templatetest reviews its statements.
		if p, _ := tmpl.Resource(id); len(f.Policies) == 0 && tmpl.ResourceType(refTarget(p["Role"])) != "AWS::IAM::Role" {
			t.Errorf("%s: neither Policies nor a Role of the template (Role = %v)", id, p["Role"])
		}
	}
	if got := fns["SubmitFunction"].Env["TASKS_TABLE"]; !reflect.DeepEqual(got, map[string]any{"Ref": "TasksTable"}) {
		t.Errorf("TASKS_TABLE = %#v", got)
	}
	w := fns["WorkerFunction"].Env
	for _, k := range []string{"PROVIDER", "PROVIDER_MODEL", "PROVIDER_BASE_URL", "PROVIDER_API_KEY_SECRET_ARN", "PROVIDER_TIMEOUT", "LEASE_SECONDS", "WORKER_CONCURRENCY"} {
		if _, ok := w[k]; !ok {
			t.Errorf("worker env %s missing", k)
		}
	}
	if _, ok := fns["ReconcilerFunction"].Env["DEAD_LETTER_QUEUE_URL"]; !ok {
		t.Error("reconciler env DEAD_LETTER_QUEUE_URL missing")
	}
	if _, ok := fns["SubmitFunction"].Env["ALLOWED_ORIGINS"]; !ok {
		t.Error("submit env ALLOWED_ORIGINS missing")
	}

	// The queue's visibility timeout must cover the worker's timeout (AWS
	// rejects the event source mapping otherwise); we keep it at 6x.
	if vt, to := tmpl.QueueVisibilityTimeout("TaskQueue"), fns["WorkerFunction"].Timeout; vt < 6*to {
		t.Errorf("TaskQueue visibility %v < 6 x worker timeout %v", vt, to)
	}
}

func TestTemplateEvents(t *testing.T) {
	t.Parallel()
	tmpl := realTemplate(t)

	want := []EventSourceMapping{{
		Function:                "WorkerFunction",
		Queue:                   "TaskQueue",
		BatchSize:               10,
		MaxBatchingWindow:       time.Second,
		ReportBatchItemFailures: true,
		MaxConcurrency:          10,
	}}
	if got := tmpl.SQSEvents(); !reflect.DeepEqual(got, want) {
		t.Errorf("SQSEvents = %+v, want %+v", got, want)
	}

	wantS := []Schedule{{Function: "ReconcilerFunction", Expression: "rate(1 minute)", Every: time.Minute}}
	if got := tmpl.Schedules(); !reflect.DeepEqual(got, wantS) {
		t.Errorf("Schedules = %+v, want %+v", got, wantS)
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"rate(1 minute)":   time.Minute,
		"rate(5 minutes)":  5 * time.Minute,
		"rate(30 seconds)": 30 * time.Second,
		"rate(1 hour)":     time.Hour,
		"rate(2 days)":     48 * time.Hour,
	} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"cron(0 * * * ? *)", "rate(0 minutes)", "rate(1 fortnight)", "rate(1minute)", "rate(x minutes)"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q): want error", bad)
		}
	}
}

func TestGlobalsMerge(t *testing.T) {
	t.Parallel()
	tmpl, err := parse([]byte(`
Globals:
  Function:
    Timeout: 5
    Layers: [g]
    Environment: {Variables: {A: global, B: global}}
Resources:
  F:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 7
      Layers: [l]
      Environment: {Variables: {B: local, C: !Ref X}}
      Policies: AWSLambdaBasicExecutionRole
`))
	if err != nil {
		t.Fatal(err)
	}
	p := tmpl.functionProperties("F")
	if p["Timeout"] != 7 || !reflect.DeepEqual(p["Layers"], []any{"g", "l"}) {
		t.Errorf("merged = %v", p)
	}
	f := tmpl.Functions()["F"]
	wantEnv := map[string]any{"A": "global", "B": "local", "C": map[string]any{"Ref": "X"}}
	if !reflect.DeepEqual(f.Env, wantEnv) || f.MemorySize != 128 || !slices.Equal(f.Architectures, []string{"x86_64"}) ||
		!reflect.DeepEqual(f.Policies, []any{"AWSLambdaBasicExecutionRole"}) {
		t.Errorf("Function = %+v", f)
	}
}

func TestUnsupportedPropertyIsAnError(t *testing.T) {
	t.Parallel()
	_, _, err := tableInput("x", "T", map[string]any{
		"KeySchema": []any{}, "AttributeDefinitions": []any{}, "StreamSpecificationX": 1,
	})
	if err == nil || !strings.Contains(err.Error(), "StreamSpecificationX is not supported") {
		t.Errorf("err = %v", err)
	}
	_, _, err = tableInput("x", "T", map[string]any{
		"KeySchema": []any{}, "AttributeDefinitions": []any{},
		"GlobalSecondaryIndexes": []any{map[string]any{"IndexName": "i", "KeySchema": []any{}, "Projection": map[string]any{"ProjectionType": "ALL"}, "WarmThroughput": 1}},
	})
	if err == nil || !strings.Contains(err.Error(), "WarmThroughput") {
		t.Errorf("GSI err = %v", err)
	}
}
