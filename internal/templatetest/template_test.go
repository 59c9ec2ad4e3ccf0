package templatetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/stack"
	"gopkg.in/yaml.v3"
)

// notSetByTemplate are variables the code reads that template.yaml leaves
// unset on purpose, with the reason. Every entry must still be read by some
// function, so the list cannot rot.
var notSetByTemplate = map[string]string{
	"AWS_REGION":                   "set by the Lambda runtime",
	"AWS_DEFAULT_REGION":           "set by the Lambda runtime",
	"AWS_ENDPOINT_URL":             "emulators only (make run, tests); unset in AWS",
	"AWS_ENDPOINT_URL_DYNAMODB":    "emulators only; unset in AWS",
	"AWS_ENDPOINT_URL_S3":          "emulators only; unset in AWS",
	"TASKLEDGER_SDK_MAX_ATTEMPTS":  "optional; the default (3 attempts) is the deployed setting",
	"PROVIDER_SEED":                "simulated provider only (local runs, tests, demos)",
	"PROVIDER_FAULTS":              "simulated provider only: fault injection is never deployed",
	"PROVIDER_SIMULATED_MODE":      "simulated provider only: which guarantees it simulates (local runs, tests, demos)",
	"PROVIDER_SIMULATED_STREAM_MS": "simulated provider only: the pace of its streamed chunks (local runs, tests, demos)",
	"PROVIDER_API_KEY_ENV":         "names a variable holding an API key; deployments use PROVIDER_API_KEY_SECRET_ARN instead, so no key is ever in the function's configuration",
}

// dynamicReads are environment reads whose name is not a constant, by the
// function that makes them (see facts.dynamic), with the reason.
var dynamicReads = map[string]string{
	"envKey.APIKey": "openai.EnvKey reads the variable PROVIDER_API_KEY_ENV names (default OPENAI_API_KEY) " +
		"— only when no PROVIDER_API_KEY_SECRET_ARN is set, which a deployment always sets for Provider=openai",
}

// permissionOnlyParams are parameters a policy may reference although no
// environment variable carries them.
var permissionOnlyParams = map[string]string{
	"BedrockResourceArns": "the exact Bedrock ARNs to grant; the code only needs the model id (PROVIDER_MODEL)",
	"SecretsKmsKeyArn":    "the customer-managed key of the secrets a function reads; Secrets Manager decrypts with it on the function's behalf (kms:ViaService), the code never names it",
}

// secretsManagerKMS is the permission Secrets Manager uses on a function's
// behalf when a secret it reads is encrypted with a customer-managed key:
// needed exactly by functions whose code calls GetSecretValue, and granted
// only through Secrets Manager (TestKMSOnlyThroughSecretsManager).
const secretsManagerKMS = "kms:Decrypt"

// awsRequiredWildcards documents the only "*" the deployed roles hold. None
// is written in template.yaml: the functions run as the template's own roles
// (no AWS managed policy), and the one "*" comes from an ARN CloudFormation
// resolves. TestPoliciesAreScoped checks each entry is used as documented.
var awsRequiredWildcards = map[string]string{
	"AWS::Logs::LogGroup.Arn": "a log group's Arn attribute ends in \":*\" — every log stream of that one group, " +
		"the resource logs:CreateLogStream and logs:PutLogEvents take (AWS's documented form for a function's logs)",
	"AWS::S3::Bucket key prefix": "${Bucket.Arn}/<prefix>/* — the objects under one key prefix of the stack's own bucket " +
		"(object keys are content hashes and task ids, known only at run time); TestPayloadBucket pins each prefix per function",
	"@connections/*": "execute-api:ManageConnections on ${StreamApi}/${StreamStage}/POST/@connections/* — posting to any connection " +
		"of the stack's own WebSocket API and stage (connection ids exist only at run time)",
}

// signedByHandNeeds are IAM actions a function's code needs for requests
// it signs itself (SigV4) rather than through an SDK client the analysis
// sees, with the code that makes them.
var signedByHandNeeds = map[string]map[string]string{
	"WorkerFunction": {"execute-api:ManageConnections": "stream.ConnectionsClient.PostToConnection: the streamed reply's frames, " +
		"POST @connections/{id} signed with the SDK's SigV4 signer (the SDK's apigatewaymanagementapi module is not on the module proxy this project builds from)"},
}

// lambdaServiceActions are permissions the Lambda service uses with a
// function's role, never its code, each on exactly one resource of the
// template: the function's log group, and the queue of its SQS event source
// mapping. They are checked in place of code facts.
func lambdaServiceActions(tpl *stack.Template, id string) map[string]string {
	out := map[string]string{}
	p, _ := tpl.Resource(id)
	lc, _ := p["LoggingConfig"].(map[string]any)
	if g := ref(lc["LogGroup"]); g != "" {
		out["logs:CreateLogStream"] = g
		out["logs:PutLogEvents"] = g
	}
	for _, e := range tpl.SQSEvents() {
		if e.Function == id {
			for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"} {
				out[a] = e.Queue
			}
		}
	}
	return out
}

var (
	factsOnce sync.Once
	factsByFn map[string]facts
	factsErr  error
)

// codeFacts analyses every function once per test binary.
func codeFacts(t *testing.T, tpl *stack.Template) map[string]facts {
	t.Helper()
	factsOnce.Do(func() {
		root := moduleRoot(t)
		tables := tpl.LogicalIDs("AWS::DynamoDB::Table")
		factsByFn = map[string]facts{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for id := range tpl.Functions() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f, err := analyse(root, "./functions/"+functionDir(id), tables)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					factsErr = fmt.Errorf("%s: %w", id, err)
				}
				factsByFn[id] = f
			}()
		}
		wg.Wait()
	})
	if factsErr != nil {
		t.Fatal(factsErr)
	}
	return factsByFn
}

// functionDir maps a logical id to its directory under functions/:
// SubmitFunction → submit.
func functionDir(id string) string { return strings.ToLower(strings.TrimSuffix(id, "Function")) }

// moduleRoot is the directory of go.mod at or above the working directory
// (the template may be elsewhere: TASKLEDGER_TEMPLATE).
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for !fileExists(filepath.Join(dir, "go.mod")) {
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod at or above the working directory")
		}
		dir = parent
	}
	return dir
}

func load(t *testing.T) *stack.Template {
	t.Helper()
	p, err := stack.Find()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func TestEveryFunctionHasItsCode(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	root := moduleRoot(t)
	ids := slices.Sorted(maps.Keys(tpl.Functions()))
	if !slices.Equal(ids, []string{"ExampleDestinationFunction", "ReconcilerFunction", "StreamFunction", "SubmitFunction", "WorkerFunction"}) {
		t.Fatalf("functions = %v", ids)
	}
	for _, id := range ids {
		if !fileExists(filepath.Join(root, "functions", functionDir(id), "main.go")) {
			t.Errorf("%s: no functions/%s/main.go", id, functionDir(id))
		}
		p, _ := tpl.Resource(id)
		if p["CodeUri"] != "." {
			t.Errorf("%s: CodeUri = %v, want the module root", id, p["CodeUri"])
		}
	}
}

// globalsUnread are variables Globals.Function gives a function whose code
// need not read them, with the reason.
var globalsUnread = map[string]map[string]string{
	"ExampleDestinationFunction": {
		"TASKS_TABLE":    "the receiving team's example function: Globals give every function the stack's names; it has no access to them",
		"REVIEW_TABLE":   "as TASKS_TABLE",
		"WATCH_TABLE":    "as TASKS_TABLE",
		"TASK_QUEUE_URL": "as TASKS_TABLE",
	},
}

// (i) Each function's environment variables are exactly the ones its code
// reads, less the documented notSetByTemplate (and globalsUnread).
func TestEnvironmentMatchesCode(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	all := codeFacts(t, tpl)
	readAnywhere := map[string]bool{}
	for id, f := range tpl.Functions() {
		code := all[id]
		for name, where := range code.env {
			readAnywhere[name] = true
			if _, set := f.Env[name]; !set && notSetByTemplate[name] == "" {
				t.Errorf("%s: the code reads %s (%s) but template.yaml does not set it", id, name, strings.Join(where, ", "))
			}
		}
		for name := range f.Env {
			if code.env[name] == nil && globalsUnread[id][name] == "" {
				t.Errorf("%s: template.yaml sets %s but the function's code never reads it", id, name)
			}
			if notSetByTemplate[name] != "" {
				t.Errorf("%s: template.yaml sets %s, which notSetByTemplate says it leaves unset", id, name)
			}
		}
		for where, calls := range code.dynamic {
			fn, _, _ := strings.Cut(where, " (")
			if dynamicReads[fn] == "" {
				t.Errorf("%s: %s reads an environment variable whose name is not a constant (%s): make it one, or list it in dynamicReads with the reason", id, where, strings.Join(calls, "; "))
			}
		}
		t.Logf("%s reads %v", id, slices.Sorted(maps.Keys(code.env)))
	}
	for name, why := range notSetByTemplate {
		if !readAnywhere[name] {
			t.Errorf("notSetByTemplate lists %s (%s) but no function reads it", name, why)
		}
	}
}

// (ii) Each function's IAM statements (its role's inline policies) grant
// exactly what its code calls — the same actions, on the same tables and
// indexes — plus what the Lambda service does with the role
// (lambdaServiceActions).
func TestPoliciesMatchCode(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	all := codeFacts(t, tpl)
	for id := range tpl.Functions() {
		code := all[id].needs
		needs := maps.Clone(code)
		for a, on := range lambdaServiceActions(tpl, id) {
			if needs[a] == nil {
				needs[a] = []string{"the Lambda service on " + on}
			}
		}
		if needs["secretsmanager:GetSecretValue"] != nil {
			needs[secretsManagerKMS] = []string{"Secrets Manager, decrypting a secret under SecretsKmsKeyArn"}
		}
		if why := listBucketNeeds[id]; why != "" {
			needs["s3:ListBucket"] = []string{why}
		}
		for a, why := range signedByHandNeeds[id] {
			needs[a] = []string{why}
		}
		grants := map[string]bool{}
		for _, s := range statements(t, tpl, id) {
			for _, g := range s.grants() {
				grants[g] = true
			}
		}
		for _, need := range slices.Sorted(maps.Keys(needs)) {
			if !grants[need] {
				t.Errorf("%s: %s is needed (%s) but the policy does not grant it", id, need, strings.Join(needs[need], ", "))
			}
		}
		for _, g := range slices.Sorted(maps.Keys(grants)) {
			if needs[g] == nil {
				t.Errorf("%s: the policy grants %s but neither the function's code nor the Lambda service needs it", id, g)
			}
		}
		t.Logf("%s needs %v", id, slices.Sorted(maps.Keys(needs)))
	}
}

// (iii) For an SQS event source mapping AWS requires the queue's visibility
// timeout to be at least the function's timeout; we keep 6x (AWS's advice),
// so a batch retried by the runtime never overlaps a live one.
func TestQueueVisibilityCoversWorker(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	fns := tpl.Functions()
	esms := tpl.SQSEvents()
	if len(esms) == 0 {
		t.Fatal("no SQS event source mapping in the template")
	}
	for _, e := range esms {
		vt, to := tpl.QueueVisibilityTimeout(e.Queue), fns[e.Function].Timeout
		if to <= 0 || vt < 6*to {
			t.Errorf("%s: VisibilityTimeout %v < 6 x %s Timeout %v", e.Queue, vt, e.Function, to)
		}
		if !e.ReportBatchItemFailures {
			t.Errorf("%s: ReportBatchItemFailures is off", e.Function)
		}
		q, _ := tpl.Resource(e.Queue)
		rp, _ := q["RedrivePolicy"].(map[string]any)
		dlq := getAtt(rp["deadLetterTargetArn"], "Arn")
		if dlq == "" || rp["maxReceiveCount"] == nil {
			t.Errorf("%s: RedrivePolicy = %v, want a dead-letter target and maxReceiveCount", e.Queue, rp)
			continue
		}
		d, _ := tpl.Resource(dlq)
		if d["MessageRetentionPeriod"] != 1209600 {
			t.Errorf("%s: MessageRetentionPeriod = %v, want 1209600 (14 days)", dlq, d["MessageRetentionPeriod"])
		}
	}
}

// (iv) No "*" in any action or resource of the roles' policies, and every
// resource is this stack's own: a table, index, queue or secret that the
// same function's environment names (or a documented permission-only
// parameter), or the function's own log group. The Lambda service's actions
// are on exactly their resource. The only "*" deployed is the one
// awsRequiredWildcards documents.
func TestPoliciesAreScoped(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	all := codeFacts(t, tpl)
	used := map[string]bool{}
	for id, f := range tpl.Functions() {
		own := map[string]bool{}
		for _, v := range f.Env {
			for r := range refs(v) {
				own[r] = true
			}
		}
		service := lambdaServiceActions(tpl, id)
		logGroup := service["logs:PutLogEvents"]
		if logGroup == "" {
			t.Errorf("%s: no LoggingConfig.LogGroup", id)
		}
		own[logGroup] = true
		for _, s := range statements(t, tpl, id) {
			for _, a := range s.actions {
				if strings.Contains(a, "*") {
					t.Errorf("%s: wildcard action %q", id, a)
				}
				on, isService := service[a]
				if !isService || all[id].needs[a] != nil {
					continue
				}
				for _, r := range s.resources {
					if getAtt(r, "Arn") != on {
						t.Errorf("%s: %s (the Lambda service's) on %v, want only !GetAtt %s.Arn", id, a, r, on)
					}
				}
			}
			for _, r := range s.resources {
				b, _ := json.Marshal(r)
				if _, _, ok := objectPrefix(tpl, r); ok {
					used["AWS::S3::Bucket key prefix"] = true
				} else if string(b) == `{"Fn::Sub":"arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${StreamApi}/${StreamStage}/POST/@connections/*"}` {
					used["@connections/*"] = true
				} else if strings.Contains(string(b), "*") {
					t.Errorf("%s: wildcard resource %s", id, b)
				}
				for ref := range refs(r) {
					if !own[ref] && permissionOnlyParams[ref] == "" {
						t.Errorf("%s: %v on %s: %s is neither named by the function's environment nor its log group", id, s.actions, b, ref)
					}
				}
				if len(refs(r)) == 0 {
					t.Errorf("%s: %v on a literal resource %s", id, s.actions, b)
				}
				// A log group's ARN resolves to "...:log-group:NAME:*".
				if g := getAtt(r, "Arn"); tpl.ResourceType(g) == "AWS::Logs::LogGroup" {
					used["AWS::Logs::LogGroup.Arn"] = true
					if g != logGroup {
						t.Errorf("%s: %v on log group %s, not its own (%s)", id, s.actions, g, logGroup)
					}
					for _, a := range s.actions {
						if a != "logs:CreateLogStream" && a != "logs:PutLogEvents" {
							t.Errorf("%s: %s on %s, whose ARN ends in :* — only the log-stream actions belong there", id, a, g)
						}
					}
				}
			}
		}
	}
	for k, why := range awsRequiredWildcards {
		if !used[k] {
			t.Errorf("awsRequiredWildcards lists %s (%s) but no statement uses it", k, why)
		}
	}
}

// Each function runs as its own role from the template, which only Lambda
// may assume and which holds inline policies only: no AWS managed policy
// (SAM attaches none to a role it did not generate), no customer managed or
// separately attached policy, no permissions boundary, no X-Ray tracing
// (its actions only take "*", and SAM would not grant them to this role).
func TestRolesAreExplicit(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"} {
		if ids := tpl.LogicalIDs(typ); len(ids) > 0 {
			t.Errorf("%s resources %v: attach statements as the role's inline Policies, where they are reviewed", typ, ids)
		}
	}
	forbidden := map[string]string{
		"Policies":            "SAM ignores Policies when Role is set: put the statements in the role",
		"PermissionsBoundary": "SAM applies it only to a role it generates",
		"Tracing":             "X-Ray needs xray:PutTraceSegments/PutTelemetryRecords on \"*\", which the roles do not grant; enabling it means adding them as a documented exception",
	}
	for _, k := range globalFunctionKeys(t, tpl) {
		if why := forbidden[k]; why != "" || k == "Role" {
			t.Errorf("Globals.Function.%s: %s", k, cmp.Or(why, "each function has its own role"))
		}
	}
	roleOf := map[string]string{}
	for _, id := range slices.Sorted(maps.Keys(tpl.Functions())) {
		p, _ := tpl.Resource(id)
		for _, k := range slices.Sorted(maps.Keys(forbidden)) {
			if p[k] != nil {
				t.Errorf("%s: %s = %v: %s", id, k, p[k], forbidden[k])
			}
		}
		role := getAtt(p["Role"], "Arn")
		if tpl.ResourceType(role) != "AWS::IAM::Role" {
			t.Errorf("%s: Role = %v, want !GetAtt <an AWS::IAM::Role of this template>.Arn", id, p["Role"])
			continue
		}
		if other, ok := roleOf[role]; ok {
			t.Errorf("%s and %s share the role %s: each function gets its own", other, id, role)
		}
		roleOf[role] = id
		r, _ := tpl.Resource(role)
		for k := range r {
			if k != "AssumeRolePolicyDocument" && k != "Policies" {
				t.Errorf("%s: property %s (%v): want AssumeRolePolicyDocument and inline Policies only", role, k, r[k])
			}
		}
		trust := map[string]any{
			"Version": "2012-10-17",
			"Statement": []any{map[string]any{
				"Effect":    "Allow",
				"Principal": map[string]any{"Service": "lambda.amazonaws.com"},
				"Action":    "sts:AssumeRole",
			}},
		}
		if !reflect.DeepEqual(r["AssumeRolePolicyDocument"], trust) {
			t.Errorf("%s: AssumeRolePolicyDocument = %v, want only lambda.amazonaws.com (sts:AssumeRole)", role, r["AssumeRolePolicyDocument"])
		}
	}
	for _, role := range tpl.LogicalIDs("AWS::IAM::Role") {
		if roleOf[role] == "" {
			t.Errorf("%s: no function uses it", role)
		}
	}
}

// globalFunctionKeys are the property names under Globals.Function.
func globalFunctionKeys(t *testing.T, tpl *stack.Template) []string {
	t.Helper()
	b, err := os.ReadFile(tpl.Path())
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	child := func(n *yaml.Node, key string) *yaml.Node {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
		return nil
	}
	if len(doc.Content) == 0 {
		t.Fatal("empty template")
	}
	fn := child(child(doc.Content[0], "Globals"), "Function")
	if fn == nil {
		t.Fatal("no Globals.Function")
	}
	var keys []string
	for i := 0; i < len(fn.Content); i += 2 {
		keys = append(keys, fn.Content[i].Value)
	}
	if !slices.Contains(keys, "Runtime") {
		t.Fatalf("Globals.Function keys %v: the YAML walk is wrong (no Runtime)", keys)
	}
	return keys
}

// API Gateway answers CORS preflights itself and overrides the function's
// CORS headers, so the HttpApi's configuration must match the handler's.
func TestCORSMatchesHandler(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	p, ok := tpl.Resource("HttpApi")
	if !ok {
		t.Fatal("no HttpApi")
	}
	br := ifBranches(p["CorsConfiguration"])
	if len(br) != 1 {
		t.Fatalf("CorsConfiguration = %v, want Fn::If [HasCors, {...}, AWS::NoValue]", p["CorsConfiguration"])
	}
	cors := br[0].(map[string]any)
	split := func(s string) []any {
		var out []any
		for _, h := range strings.Split(s, ",") {
			out = append(out, strings.TrimSpace(h))
		}
		return out
	}
	if got, want := cors["AllowHeaders"], split(api.CORSAllowHeaders); !reflect.DeepEqual(got, want) {
		t.Errorf("AllowHeaders = %v, want %v (api.CORSAllowHeaders)", got, want)
	}
	if got, want := cors["ExposeHeaders"], split(api.CORSExposeHeaders); !reflect.DeepEqual(got, want) {
		t.Errorf("ExposeHeaders = %v, want %v (api.CORSExposeHeaders)", got, want)
	}
	if cors["MaxAge"] != api.CORSMaxAge {
		t.Errorf("MaxAge = %v, want %d", cors["MaxAge"], api.CORSMaxAge)
	}
	want := map[string]any{"Fn::Split": []any{",", map[string]any{"Ref": "AllowedOrigins"}}}
	if !reflect.DeepEqual(cors["AllowOrigins"], want) {
		t.Errorf("AllowOrigins = %v, want %v", cors["AllowOrigins"], want)
	}
	if env := tpl.Functions()["SubmitFunction"].Env["ALLOWED_ORIGINS"]; !reflect.DeepEqual(env, map[string]any{"Ref": "AllowedOrigins"}) {
		t.Errorf("submit ALLOWED_ORIGINS = %v, want the same parameter as the API's CORS", env)
	}
}

// Structured JSON logs, each function in its own log group with retention.
func TestLogGroups(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	for id := range tpl.Functions() {
		p, _ := tpl.Resource(id)
		lc, _ := p["LoggingConfig"].(map[string]any)
		if lc["LogFormat"] != "JSON" {
			t.Errorf("%s: LoggingConfig.LogFormat = %v, want JSON", id, lc["LogFormat"])
		}
		group := ref(lc["LogGroup"])
		if tpl.ResourceType(group) != "AWS::Logs::LogGroup" {
			t.Errorf("%s: LoggingConfig.LogGroup = %v, want a Ref to an AWS::Logs::LogGroup", id, lc["LogGroup"])
			continue
		}
		g, _ := tpl.Resource(group)
		if ref(g["RetentionInDays"]) != "LogRetentionDays" {
			t.Errorf("%s: RetentionInDays = %v, want Ref LogRetentionDays", group, g["RetentionInDays"])
		}
	}
}

// The oldest-message, dead-letter and open-reviews alarms, with actions
// only when AlarmEmail is set, and the open-reviews alarm on the metric the
// reconciler really emits.
func TestAlarms(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	type want struct {
		namespace, metric string
		dims              []any
	}
	wants := []want{
		{"AWS/SQS", "ApproximateAgeOfOldestMessage", []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{"TaskQueue", "QueueName"}}}}},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", []any{map[string]any{"Name": "QueueName", "Value": map[string]any{"Fn::GetAtt": []any{"TaskDeadLetterQueue", "QueueName"}}}}},
		{metrics.Namespace, "OpenReviews", []any{map[string]any{"Name": "Function", "Value": "reconciler"}}},
	}
	actions := map[string]any{"Fn::If": []any{"HasAlarmEmail", []any{map[string]any{"Ref": "AlarmTopic"}}, map[string]any{"Ref": "AWS::NoValue"}}}
	for _, w := range wants {
		found := false
		for _, id := range tpl.LogicalIDs("AWS::CloudWatch::Alarm") {
			p, _ := tpl.Resource(id)
			if p["Namespace"] != w.namespace || p["MetricName"] != w.metric {
				continue
			}
			found = true
			if !reflect.DeepEqual(p["Dimensions"], w.dims) {
				t.Errorf("%s: Dimensions = %v, want %v", id, p["Dimensions"], w.dims)
			}
			if p["ComparisonOperator"] != "GreaterThanThreshold" {
				t.Errorf("%s: ComparisonOperator = %v", id, p["ComparisonOperator"])
			}
			if w.metric != "ApproximateAgeOfOldestMessage" && p["Threshold"] != 0 {
				t.Errorf("%s: Threshold = %v, want 0 (any message / any open item)", id, p["Threshold"])
			}
			if !reflect.DeepEqual(p["AlarmActions"], actions) || !reflect.DeepEqual(p["OKActions"], actions) {
				t.Errorf("%s: AlarmActions/OKActions = %v / %v, want %v", id, p["AlarmActions"], p["OKActions"], actions)
			}
		}
		if !found {
			t.Errorf("no alarm on %s %s", w.namespace, w.metric)
		}
	}
	if !emits(t, filepath.Join(moduleRoot(t), "internal", "reconciler"), "OpenReviews", "Function", "reconciler") {
		t.Error(`internal/reconciler no longer emits OpenReviews in a Record("Function", "reconciler"): update OpenReviewsAlarm`)
	}
}

// emits reports whether a non-test file in dir has a function that both
// calls Record(dimName, dimValue) — the only dimension set — and
// Set(metric, ...) or Add(metric, ...).
func emits(t *testing.T, dir, metric, dimName, dimValue string) bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	lit := func(e ast.Expr) string {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			s, _ := strconv.Unquote(b.Value)
			return s
		}
		return ""
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			var record, set bool
			ast.Inspect(d, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				s, ok := c.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch {
				case s.Sel.Name == "Record" && len(c.Args) == 2 && lit(c.Args[0]) == dimName && lit(c.Args[1]) == dimValue:
					record = true
				case (s.Sel.Name == "Set" || s.Sel.Name == "Add") && len(c.Args) > 0 && lit(c.Args[0]) == metric:
					set = true
				}
				return true
			})
			if record && set {
				return true
			}
		}
	}
	return false
}

// statement is one policy statement with Fn::If expanded.
type statement struct {
	actions   []string
	resources []any
	condition any
}

// grants are the permissions a statement gives, in the form facts.needs
// uses: DynamoDB by table (and index) logical id, other services by action.
func (s statement) grants() []string {
	var out []string
	for _, a := range s.actions {
		if !strings.HasPrefix(a, "dynamodb:") {
			out = append(out, a)
			continue
		}
		for _, r := range s.resources {
			out = append(out, a+" on "+tableResource(r))
		}
	}
	return out
}

// tableResource names a DynamoDB resource: !GetAtt T.Arn → "T",
// !Sub ${T.Arn}/index/I → "T/index/I"; anything else is quoted as is.
func tableResource(r any) string {
	if t := getAtt(r, "Arn"); t != "" {
		return t
	}
	if m, ok := r.(map[string]any); ok {
		if s, ok := m["Fn::Sub"].(string); ok {
			if g := subIndex.FindStringSubmatch(s); g != nil {
				return g[1] + "/index/" + g[2]
			}
		}
	}
	b, _ := json.Marshal(r)
	return "?" + string(b)
}

var subIndex = regexp.MustCompile(`^\$\{(\w+)\.Arn\}/index/(\w+)$`)

// statements expands the inline policies of a function's role (its Role:
// !GetAtt <role>.Arn). A policy that is not an inline document fails the
// test: least privilege is reviewed here, statement by statement.
func statements(t *testing.T, tpl *stack.Template, id string) []statement {
	t.Helper()
	p, _ := tpl.Resource(id)
	role := getAtt(p["Role"], "Arn")
	r, ok := tpl.Resource(role)
	if !ok || tpl.ResourceType(role) != "AWS::IAM::Role" {
		t.Errorf("%s: Role = %v is not an AWS::IAM::Role of the template", id, p["Role"])
		return nil
	}
	policies := listOf(r["Policies"])
	if len(policies) == 0 {
		t.Errorf("%s: role %s has no inline Policies", id, role)
	}
	var out []statement
	for _, pol := range policies {
		m, _ := pol.(map[string]any)
		doc, ok := m["PolicyDocument"].(map[string]any)
		if !ok || m["PolicyName"] == nil || doc["Statement"] == nil {
			t.Errorf("%s: %s policy %v is not an inline {PolicyName, PolicyDocument}", id, role, pol)
			continue
		}
		for _, raw := range listOf(doc["Statement"]) {
			st, ok := raw.(map[string]any)
			if !ok || st["Effect"] != "Allow" {
				t.Errorf("%s: statement %v: want an Allow statement", id, raw)
				continue
			}
			if st["NotAction"] != nil || st["NotResource"] != nil {
				t.Errorf("%s: NotAction/NotResource grant everything else: %v", id, st)
			}
			var s statement
			for _, a := range listOf(st["Action"]) {
				as, _ := a.(string)
				s.actions = append(s.actions, as)
			}
			s.resources = listOf(st["Resource"])
			s.condition = st["Condition"]
			out = append(out, s)
		}
	}
	return out
}

// ifBranches expands Fn::If into both branches (each condition depends on
// a parameter, so each branch is live in some deployment), dropping
// AWS::NoValue.
func ifBranches(v any) []any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		if args, ok := m["Fn::If"].([]any); ok && len(args) == 3 {
			return append(ifBranches(args[1]), ifBranches(args[2])...)
		}
		if m["Ref"] == "AWS::NoValue" {
			return nil
		}
	}
	return []any{v}
}

// listOf flattens a value that may be a scalar, a list or an Fn::If of
// either into its elements.
func listOf(v any) []any {
	var out []any
	for _, b := range ifBranches(v) {
		if l, ok := b.([]any); ok {
			for _, e := range l {
				out = append(out, ifBranches(e)...)
			}
			continue
		}
		out = append(out, b)
	}
	return out
}

// refs returns the logical ids and parameters a value references (Ref,
// Fn::GetAtt, ${X} and ${X.Attr} in Fn::Sub), without pseudo parameters.
func refs(v any) map[string]bool {
	out := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "Ref":
					if s, ok := x.(string); ok && !strings.HasPrefix(s, "AWS::") {
						out[s] = true
					}
				case "Fn::GetAtt":
					if l, ok := x.([]any); ok && len(l) > 0 {
						out[fmt.Sprint(l[0])] = true
					}
				case "Fn::Sub":
					s, _ := x.(string)
					if l, ok := x.([]any); ok && len(l) > 0 {
						s, _ = l[0].(string)
						walk(l[1:])
					}
					for _, m := range subVar.FindAllStringSubmatch(s, -1) {
						if !strings.HasPrefix(m[1], "AWS::") {
							out[m[1]] = true
						}
					}
				default:
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

var subVar = regexp.MustCompile(`\$\{([\w:]+)(?:\.\w+)?\}`)

// getAtt returns X for {"Fn::GetAtt": [X, attr]}.
func getAtt(v any, attr string) string {
	m, _ := v.(map[string]any)
	l, _ := m["Fn::GetAtt"].([]any)
	if len(l) == 2 && l[1] == attr {
		s, _ := l[0].(string)
		return s
	}
	return ""
}

// ref returns X for {"Ref": X}.
func ref(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["Ref"].(string)
	return s
}

// The analysis itself must be able to fail: testdata/fixture reads the
// environment every way the analysis knows, calls DynamoDB through a query
// and a transaction, and has unreachable code that must not count.
func TestAnalysisFindsFixtureFacts(t *testing.T) {
	t.Parallel()
	f, err := analyse(moduleRoot(t), "./internal/templatetest/testdata/fixture", []string{"TasksTable", "ReviewTable"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"LISTED_A", "LISTED_B", "VIA_CLOSURE"} {
		if f.env[v] == nil {
			t.Errorf("env %s not found; got %v", v, slices.Sorted(maps.Keys(f.env)))
		}
	}
	if f.env["NEVER_READ"] != nil {
		t.Error("an env read in unreachable code was counted")
	}
	if len(f.dynamic) != 1 {
		t.Errorf("dynamic reads = %v, want the LookupEnv(name) in main", f.dynamic)
	}
	needs := slices.Sorted(maps.Keys(f.needs))
	want := []string{"dynamodb:ConditionCheckItem on TasksTable", "dynamodb:PutItem on ReviewTable", "dynamodb:Query on ReviewTable/index/open_reviews"}
	if !slices.Equal(needs, want) {
		t.Errorf("needs = %v, want %v", needs, want)
	}
}

// TestSubmitChecksTheWorkersProvider: the submit function refuses tasks
// the worker's provider could never run (api.ProviderProfile), so it must
// be told the very provider, model and admission limits the worker runs
// with — the same template values, not a copy that could drift — and no
// more: no key, no secret, no base URL.
func TestSubmitChecksTheWorkersProvider(t *testing.T) {
	t.Parallel()
	fns := load(t).Functions()
	submit, worker := fns["SubmitFunction"], fns["WorkerFunction"]
	for _, name := range []string{"PROVIDER", "PROVIDER_MODEL", "PROVIDER_ADMISSION"} {
		s, ok := submit.Env[name]
		if !ok {
			t.Errorf("SubmitFunction does not get %s", name)
			continue
		}
		if !reflect.DeepEqual(s, worker.Env[name]) {
			t.Errorf("%s: SubmitFunction gets %v, WorkerFunction %v; they must be the same value", name, s, worker.Env[name])
		}
	}
	for _, name := range []string{"PROVIDER_API_KEY_SECRET_ARN", "PROVIDER_API_KEY_ENV", "PROVIDER_BASE_URL", "PROVIDER_TIMEOUT"} {
		if _, ok := submit.Env[name]; ok {
			t.Errorf("SubmitFunction gets %s: it needs the provider's name, model and limits only", name)
		}
	}
}
