package templatetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/pkg/ledger"
)

var noValue = stack.NoValue

// deployment is stack.Values for one set of parameter values, failing the
// test on an evaluation error. Resource references stay symbolic
// ("ref:X", "getatt:X.Attr", "sub:..."), which is all the assertions need.
type deployment struct {
	t      *testing.T
	v      *stack.Values
	params map[string]any
}

func deploy(t *testing.T, tpl *stack.Template, overrides map[string]string) *deployment {
	t.Helper()
	v, err := tpl.Values(overrides)
	if err != nil {
		t.Fatal(err)
	}
	return &deployment{t: t, v: v, params: map[string]any{"AllowedOrigins": v.Param("AllowedOrigins")}}
}

func (d *deployment) cond(name string) bool {
	d.t.Helper()
	b, err := d.v.Condition(name)
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

func (d *deployment) eval(x any) any {
	d.t.Helper()
	r, err := d.v.Eval(x, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	return r
}

func (d *deployment) ruleFailures(tpl *stack.Template) []string {
	d.t.Helper()
	f, err := tpl.RuleFailures(d.v)
	if err != nil {
		d.t.Fatal(err)
	}
	return f
}

var authModes = []string{"jwt", "cognito", "iam", "none"}

// settings are parameter values that satisfy each mode.
var settings = map[string]map[string]string{
	"jwt":     {"AuthMode": "jwt", "JwtIssuer": "https://login.example.com", "JwtAudience": "page-client,cli"},
	"cognito": {"AuthMode": "cognito"},
	"iam":     {"AuthMode": "iam"},
	"none":    {"AuthMode": "none"},
}

// A default `sam deploy` fails before creating anything, with a message
// that says what to set; each mode deploys with its own settings.
func TestDefaultDeployNeedsAnAuthorizer(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	p := tpl.Section("Parameters")["AuthMode"].(map[string]any)
	if p["Default"] != "jwt" || !reflect.DeepEqual(p["AllowedValues"], []any{"jwt", "cognito", "iam", "none"}) {
		t.Fatalf("AuthMode = %v, want default jwt of [jwt cognito iam none]", p)
	}
	fails := deploy(t, tpl, nil).ruleFailures(tpl)
	if len(fails) == 0 {
		t.Fatal("a deploy with default parameters passes the Rules: it would have no authorizer settings")
	}
	all := strings.Join(fails, " ")
	for _, want := range []string{"JwtIssuer", "JwtAudience", "AuthMode=cognito", "AuthMode=none"} {
		if !strings.Contains(all, want) {
			t.Errorf("the failure message does not mention %s: %s", want, all)
		}
	}
	if f := deploy(t, tpl, map[string]string{"JwtIssuer": "https://login.example.com"}).ruleFailures(tpl); len(f) != 1 || !strings.Contains(f[0], "JwtAudience") {
		t.Errorf("jwt with an issuer but no audience: %v", f)
	}
	for _, m := range authModes {
		if f := deploy(t, tpl, settings[m]).ruleFailures(tpl); len(f) > 0 {
			t.Errorf("AuthMode=%s with its settings fails the Rules: %v", m, f)
		}
	}
}

var (
	taskRoutes = []string{"POST /tasks", "GET /tasks/{id}", "POST /tasks/{id}/regenerate", "POST /tasks/{id}/cancel",
		"POST /tasks/{id}/approve", "POST /tasks/{id}/reject", "POST /tasks/{id}/withdraw", "POST /uploads",
		"GET /conversations/{id}", "GET /tasks", "GET /approvals"}
	publicRoutes = []string{"GET /", "GET /static/{proxy+}", "GET /auth/config"}
)

// Every task route requires the mode's authorizer (none only in mode
// none); the page, its files and /auth/config are public; there is no
// other route (no catch-all that would bypass the authorizer).
func TestRoutesRequireTheAuthorizer(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	want := map[string]string{"jwt": "JWT", "cognito": "JWT", "iam": "AWS_IAM", "none": "NONE"}
	for _, m := range authModes {
		d := deploy(t, tpl, settings[m])
		seen := map[string]bool{}
		for _, id := range tpl.LogicalIDs("AWS::ApiGatewayV2::Route") {
			p, _ := tpl.Resource(id)
			key, _ := p["RouteKey"].(string)
			if ref(p["ApiId"]) == "StreamApi" {
				continue // TestStreamRoutesRequireTheAuthorizer
			}
			seen[key] = true
			if ref(p["ApiId"]) != "HttpApi" || d.eval(p["Target"]) != "sub:integrations/${SubmitIntegration}" {
				t.Errorf("%s: ApiId %v Target %v, want HttpApi and the submit integration", id, p["ApiId"], p["Target"])
			}
			auth, authorizer := d.eval(p["AuthorizationType"]), d.eval(p["AuthorizerId"])
			switch {
			case slices.Contains(taskRoutes, key):
				if auth != want[m] {
					t.Errorf("AuthMode=%s: %s (%s) has AuthorizationType %v, want %s", m, key, id, auth, want[m])
				}
				if (want[m] == "JWT") != (authorizer == "ref:JwtAuthorizer") {
					t.Errorf("AuthMode=%s: %s has AuthorizerId %v", m, key, authorizer)
				}
			case slices.Contains(publicRoutes, key):
				if auth != "NONE" || p["AuthorizerId"] != nil {
					t.Errorf("%s is public, but AuthorizationType %v AuthorizerId %v", key, auth, p["AuthorizerId"])
				}
			default:
				t.Errorf("%s: route %q is neither a task route nor a public one", id, key)
			}
		}
		for _, k := range append(slices.Clone(taskRoutes), publicRoutes...) {
			if !seen[k] {
				t.Errorf("no route %s", k)
			}
		}
		e, _ := tpl.ResourceEntry("JwtAuthorizer")
		if has := d.cond(e["Condition"].(string)); has != (want[m] == "JWT") {
			t.Errorf("AuthMode=%s: JwtAuthorizer created = %v", m, has)
		}
	}
	// The authorizer's issuer and audience per mode.
	p, _ := tpl.Resource("JwtAuthorizer")
	jc := p["JwtConfiguration"].(map[string]any)
	jwt, cognito := deploy(t, tpl, settings["jwt"]), deploy(t, tpl, settings["cognito"])
	if jwt.eval(jc["Issuer"]) != "https://login.example.com" || !reflect.DeepEqual(jwt.eval(jc["Audience"]), []any{"page-client", "cli"}) {
		t.Errorf("jwt authorizer: %v %v", jwt.eval(jc["Issuer"]), jwt.eval(jc["Audience"]))
	}
	if cognito.eval(jc["Issuer"]) != "getatt:UserPool.ProviderURL" || !reflect.DeepEqual(cognito.eval(jc["Audience"]), []any{"ref:UserPoolClient"}) {
		t.Errorf("cognito authorizer: %v %v", cognito.eval(jc["Issuer"]), cognito.eval(jc["Audience"]))
	}
	if p["AuthorizerType"] != "JWT" || !reflect.DeepEqual(p["IdentitySource"], []any{"$request.header.Authorization"}) {
		t.Errorf("JwtAuthorizer %v", p)
	}
	// API Gateway may invoke the submit function for this API only.
	perm, _ := tpl.Resource("SubmitInvokePermission")
	if ref(perm["FunctionName"]) != "SubmitFunction" || perm["Principal"] != "apigateway.amazonaws.com" ||
		!strings.Contains(fmt.Sprint(perm["SourceArn"]), ":${HttpApi}/") {
		t.Errorf("SubmitInvokePermission %v", perm)
	}
}

// The WebSocket API of streamed replies: $connect requires the mode's
// authorizer (the REQUEST authorizer on the Sec-WebSocket-Protocol header
// for jwt and cognito, SigV4 for iam, none only in mode none) — on a
// WebSocket API only $connect is authorised, every later message of the
// connection carries its identity; there are exactly the four routes, all
// on the stream function, which API Gateway may invoke for this API only.
func TestStreamRoutesRequireTheAuthorizer(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	api, _ := tpl.Resource("StreamApi")
	if api["ProtocolType"] != "WEBSOCKET" || api["RouteSelectionExpression"] != "$request.body.action" {
		t.Fatalf("StreamApi %v", api)
	}
	want := map[string]string{"jwt": "CUSTOM", "cognito": "CUSTOM", "iam": "AWS_IAM", "none": "NONE"}
	for _, m := range authModes {
		d := deploy(t, tpl, settings[m])
		seen := map[string]bool{}
		for _, id := range tpl.LogicalIDs("AWS::ApiGatewayV2::Route") {
			p, _ := tpl.Resource(id)
			if ref(p["ApiId"]) != "StreamApi" {
				continue
			}
			key, _ := p["RouteKey"].(string)
			seen[key] = true
			if d.eval(p["Target"]) != "sub:integrations/${StreamIntegration}" {
				t.Errorf("%s: Target %v, want the stream integration", id, p["Target"])
			}
			auth, authorizer := d.eval(p["AuthorizationType"]), d.eval(p["AuthorizerId"])
			if key == "$connect" {
				if auth != want[m] || (want[m] == "CUSTOM") != (authorizer == "ref:StreamAuthorizer") {
					t.Errorf("AuthMode=%s: $connect has AuthorizationType %v AuthorizerId %v, want %s", m, auth, authorizer, want[m])
				}
			} else if p["AuthorizationType"] != nil || p["AuthorizerId"] != nil {
				t.Errorf("%s: only $connect is authorised on a WebSocket API, not %s", id, key)
			}
		}
		if !reflect.DeepEqual(seen, map[string]bool{"$connect": true, "$disconnect": true, "subscribe": true, "$default": true}) {
			t.Errorf("stream routes %v", seen)
		}
		e, _ := tpl.ResourceEntry("StreamAuthorizer")
		if has := d.cond(e["Condition"].(string)); has != (want[m] == "CUSTOM") {
			t.Errorf("AuthMode=%s: StreamAuthorizer created = %v", m, has)
		}
	}
	p, _ := tpl.Resource("StreamAuthorizer")
	if p["AuthorizerType"] != "REQUEST" || !reflect.DeepEqual(p["IdentitySource"], []any{"route.request.header.Sec-WebSocket-Protocol"}) ||
		!strings.Contains(fmt.Sprint(p["AuthorizerUri"]), "${StreamFunction.Arn}") {
		t.Errorf("StreamAuthorizer %v", p)
	}
	perm, _ := tpl.Resource("StreamInvokePermission")
	if ref(perm["FunctionName"]) != "StreamFunction" || perm["Principal"] != "apigateway.amazonaws.com" ||
		!strings.Contains(fmt.Sprint(perm["SourceArn"]), ":${StreamApi}/") {
		t.Errorf("StreamInvokePermission %v", perm)
	}
}

// Route throttling has defaults; CORS is off by default (the page is same
// origin).
func TestThrottlingAndCORSDefaults(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	st, _ := tpl.Resource("HttpApiStage")
	rs, _ := st["DefaultRouteSettings"].(map[string]any)
	if ref(st["ApiId"]) != "HttpApi" || st["StageName"] != "$default" || ref(rs["ThrottlingBurstLimit"]) != "ThrottlingBurstLimit" || ref(rs["ThrottlingRateLimit"]) != "ThrottlingRateLimit" {
		t.Fatalf("HttpApiStage %v: want $default with DefaultRouteSettings throttling from parameters", st)
	}
	params := tpl.Section("Parameters")
	for _, p := range []string{"ThrottlingBurstLimit", "ThrottlingRateLimit"} {
		n, _ := params[p].(map[string]any)["Default"].(int)
		if n <= 0 {
			t.Errorf("%s default %v: want a positive number", p, params[p])
		}
	}
	d := deploy(t, tpl, settings["jwt"])
	if d.params["AllowedOrigins"] != "" || d.cond("HasCors") {
		t.Errorf("AllowedOrigins default %q: want empty (no CORS)", d.params["AllowedOrigins"])
	}
	api, _ := tpl.Resource("HttpApi")
	if d.eval(api["CorsConfiguration"]) != noValue {
		t.Errorf("default CorsConfiguration = %v, want none", d.eval(api["CorsConfiguration"]))
	}
}

// What the submit function tells the page (GET /auth/config) matches the
// authorizer in every mode, and passes the function's own validation.
func TestSubmitAuthEnvironment(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	env := tpl.Functions()["SubmitFunction"].Env
	want := map[string][3]string{
		"jwt":     {api.AuthJWT, "https://login.example.com", "page-client"},
		"cognito": {api.AuthJWT, "getatt:UserPool.ProviderURL", "ref:UserPoolClient"},
		"iam":     {api.AuthIAM, "", ""},
		"none":    {api.AuthNone, "", ""},
	}
	for _, m := range authModes {
		d := deploy(t, tpl, settings[m])
		got := [3]string{fmt.Sprint(d.eval(env["AUTH_MODE"])), fmt.Sprint(d.eval(env["OIDC_ISSUER"])), fmt.Sprint(d.eval(env["OIDC_CLIENT_ID"]))}
		if got != want[m] {
			t.Errorf("AuthMode=%s: AUTH_MODE, OIDC_ISSUER, OIDC_CLIENT_ID = %q, want %q", m, got, want[m])
		}
		authz := fmt.Sprint(d.eval(env["OIDC_AUTHORIZATION_ENDPOINT"]))
		if (m == "cognito") != strings.Contains(authz, "amazoncognito.com/oauth2/authorize") {
			t.Errorf("AuthMode=%s: OIDC_AUTHORIZATION_ENDPOINT %q", m, authz)
		}
		if m != "cognito" {
			if _, err := api.ParseAuthConfig(got[0], got[1], got[2], authz); err != nil {
				t.Errorf("AuthMode=%s: the submit function would refuse its environment: %v", m, err)
			}
		}
	}
}

// AuthMode=cognito: a pool closed to strangers, a public client for the
// page (authorization code + PKCE, no secret) returning to the API's own
// URL by default, and a hosted sign-in domain.
func TestCognito(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	for _, id := range []string{"UserPool", "UserPoolClient", "UserPoolDomain"} {
		if e, ok := tpl.ResourceEntry(id); !ok || e["Condition"] != "UseCognito" {
			t.Errorf("%s: %v, want a resource with Condition UseCognito", id, e["Condition"])
		}
	}
	pool, _ := tpl.Resource("UserPool")
	if ac, _ := pool["AdminCreateUserConfig"].(map[string]any); ac["AllowAdminCreateUserOnly"] != true {
		t.Errorf("UserPool allows self sign-up: %v", pool["AdminCreateUserConfig"])
	}
	c, _ := tpl.Resource("UserPoolClient")
	if c["GenerateSecret"] != false || !reflect.DeepEqual(c["AllowedOAuthFlows"], []any{"code"}) || c["AllowedOAuthFlowsUserPoolClient"] != true ||
		!reflect.DeepEqual(c["AllowedOAuthScopes"], []any{"openid", "email", "profile"}) {
		t.Errorf("UserPoolClient %v: want a public client, code flow only, openid email profile", c)
	}
	if got := strings.Join(strings.Fields(api.DefaultScopes), " "); got != "openid email profile" {
		t.Errorf("api.DefaultScopes %q differs from the client's scopes", api.DefaultScopes)
	}
	d := deploy(t, tpl, settings["cognito"])
	self := []any{"sub:https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}/"}
	if !reflect.DeepEqual(d.eval(c["CallbackURLs"]), self) || !reflect.DeepEqual(d.eval(c["LogoutURLs"]), self) {
		t.Errorf("default callback/logout URLs %v %v, want the API's own URL", d.eval(c["CallbackURLs"]), d.eval(c["LogoutURLs"]))
	}
	custom := map[string]string{"AuthMode": "cognito", "CognitoCallbackUrls": "https://app.example.com/"}
	if got := deploy(t, tpl, custom).eval(c["CallbackURLs"]); !reflect.DeepEqual(got, []any{"https://app.example.com/"}) {
		t.Errorf("CognitoCallbackUrls not used: %v", got)
	}
}

// The task id key: a generated secret long enough for ledger.IDKey, kept
// across stack updates, read by the submit function only.
func TestTaskIDKeySecret(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	e, ok := tpl.ResourceEntry("TaskIdKeySecret")
	if !ok || e["Type"] != "AWS::SecretsManager::Secret" || e["DeletionPolicy"] != "Retain" || e["UpdateReplacePolicy"] != "Retain" {
		t.Fatalf("TaskIdKeySecret %v: want a retained AWS::SecretsManager::Secret", e)
	}
	p := e["Properties"].(map[string]any)
	g, _ := p["GenerateSecretString"].(map[string]any)
	if n, _ := g["PasswordLength"].(int); n < ledger.MinIDKeyBytes || g["SecretStringTemplate"] != nil {
		t.Errorf("GenerateSecretString %v: want a plain string of at least %d characters", g, ledger.MinIDKeyBytes)
	}
	if !reflect.DeepEqual(p["KmsKeyId"], map[string]any{"Fn::If": []any{"HasSecretsKmsKey", map[string]any{"Ref": "SecretsKmsKeyArn"}, map[string]any{"Ref": "AWS::NoValue"}}}) {
		t.Errorf("KmsKeyId %v: want SecretsKmsKeyArn when set", p["KmsKeyId"])
	}
	for id, f := range tpl.Functions() {
		named := ref(f.Env["TASK_ID_KEY_SECRET_ARN"]) == "TaskIdKeySecret"
		if named != (id == "SubmitFunction") {
			t.Errorf("%s: TASK_ID_KEY_SECRET_ARN = %v", id, f.Env["TASK_ID_KEY_SECRET_ARN"])
		}
		for _, s := range statements(t, tpl, id) {
			for _, r := range s.resources {
				if ref(r) == "TaskIdKeySecret" && id != "SubmitFunction" {
					t.Errorf("%s may read the task id key: %v", id, s.actions)
				}
			}
		}
	}
}

// kms:Decrypt is granted only on SecretsKmsKeyArn, only through Secrets
// Manager, and only to functions whose code reads a secret; the
// reconciler reads only webhook signing secrets (the signed readback of a
// deliver task), never the provider's key.
func TestKMSOnlyThroughSecretsManager(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	all := codeFacts(t, tpl)
	via := map[string]any{"StringEquals": map[string]any{"kms:ViaService": map[string]any{"Fn::Sub": "secretsmanager.${AWS::Region}.${AWS::URLSuffix}"}}}
	for id := range tpl.Functions() {
		granted := false
		for _, s := range statements(t, tpl, id) {
			if !slices.ContainsFunc(s.actions, func(a string) bool { return strings.HasPrefix(a, "kms:") }) {
				continue
			}
			granted = true
			if !reflect.DeepEqual(s.actions, []string{secretsManagerKMS}) || len(s.resources) != 1 || ref(s.resources[0]) != "SecretsKmsKeyArn" {
				t.Errorf("%s: %v on %v, want only %s on SecretsKmsKeyArn", id, s.actions, s.resources, secretsManagerKMS)
			}
			if !reflect.DeepEqual(s.condition, via) {
				t.Errorf("%s: kms condition %v, want %v", id, s.condition, via)
			}
		}
		if reads := all[id].needs["secretsmanager:GetSecretValue"] != nil; reads != granted {
			t.Errorf("%s: reads a secret %v, holds kms:Decrypt %v", id, reads, granted)
		}
	}
	for _, where := range all["ReconcilerFunction"].needs["secretsmanager:GetSecretValue"] {
		if !strings.Contains(where, "SecretsManagerSource") {
			t.Errorf("the reconciler's code reads a secret other than a webhook signing secret: %s (provider.NewReadback reads none)", where)
		}
	}
}

// SAM's translator (what `sam deploy` and cfn-lint run) keeps the Rules that
// stop a default deploy, and creates no API besides HttpApi (a function
// with HttpApi events would get an implicit, unprotected one).
func TestSAMTransformKeepsRules(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	if err := exec.Command("python3", "-c", "import samtranslator, cfnlint").Run(); err != nil {
		if os.Getenv("TASKLEDGER_REQUIRE_CFN_LINT") == "1" {
			t.Fatalf("python3 with samtranslator and cfnlint is required (TASKLEDGER_REQUIRE_CFN_LINT=1): %v", err)
		}
		t.Skipf("skipped: python3 with samtranslator and cfnlint (cfn-lint's own dependencies) is not available: %v", err)
	}
	out, err := exec.Command("python3", filepath.Join("testdata", "sam_transform.py"), tpl.Path()).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("SAM transform: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var cfn struct {
		Rules     map[string]any
		Resources map[string]struct{ Type string }
	}
	if err := json.Unmarshal(out, &cfn); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(tpl.Section("Rules"))
	var wantRules map[string]any
	_ = json.Unmarshal(want, &wantRules)
	if len(wantRules) == 0 || !reflect.DeepEqual(cfn.Rules, wantRules) {
		t.Errorf("transformed Rules = %v, want the template's %v", cfn.Rules, wantRules)
	}
	for id, r := range cfn.Resources {
		if (r.Type == "AWS::ApiGatewayV2::Api" || r.Type == "AWS::ApiGateway::RestApi") && id != "HttpApi" && id != "StreamApi" {
			t.Errorf("the transform created another API, %s (%s): no authorizer protects it", id, r.Type)
		}
	}
	if cfn.Resources["JwtAuthorizer"].Type != "AWS::ApiGatewayV2::Authorizer" {
		t.Error("the transform lost JwtAuthorizer")
	}
}
