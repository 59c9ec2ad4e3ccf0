package templatetest

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// accessLogRequired are the access log's fields a security review needs:
// which request, whose (each authorizer's caller: a JWT's sub, an IAM
// caller's ARN and id), which route, what answer, how long.
var accessLogRequired = []string{
	"$context.requestId",
	"$context.authorizer.claims.sub",
	"$context.identity.userArn",
	"$context.identity.caller",
	"$context.routeKey",
	"$context.status",
	"$context.responseLatency",
	"$context.integrationLatency",
}

// accessLogForbidden matches variables that would put what a caller sent
// into the log: the query string, any header (the Authorization header's
// bearer token among them), the raw path and its parameters (task ids; the
// route key names the route), the body, stage variables.
var accessLogForbidden = regexp.MustCompile(`(?i)querystring|query|header|authorization|token|^\$context\.path|resourcepath|pathparam|params|^\$input|^\$request|^\$method|^\$stagevariables|useragent|body|requestoverride|responseoverride`)

var logVariable = regexp.MustCompile(`\$[A-Za-z][A-Za-z0-9_.-]*`)

// TestAPIAccessLog: the HTTP API's stage writes an access log — JSON, to a
// log group of the stack with its own retention — naming who called which
// route and what came back, and nothing the caller sent.
func TestAPIAccessLog(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	stage, ok := tpl.Resource("HttpApiStage")
	if !ok {
		t.Fatal("no HttpApiStage")
	}
	als, _ := stage["AccessLogSettings"].(map[string]any)
	if als == nil {
		t.Fatal("HttpApiStage has no AccessLogSettings: the API keeps no access log")
	}
	group := getAtt(als["DestinationArn"], "Arn")
	if tpl.ResourceType(group) != "AWS::Logs::LogGroup" {
		t.Fatalf("AccessLogSettings.DestinationArn = %v, want !GetAtt <an AWS::Logs::LogGroup>.Arn", als["DestinationArn"])
	}
	g, _ := tpl.Resource(group)
	if ref(g["RetentionInDays"]) != "ApiAccessLogRetentionDays" {
		t.Errorf("%s: RetentionInDays = %v, want Ref ApiAccessLogRetentionDays", group, g["RetentionInDays"])
	}
	param, _ := tpl.Section("Parameters")["ApiAccessLogRetentionDays"].(map[string]any)
	if param == nil || param["Default"] != 30 {
		t.Errorf("parameter ApiAccessLogRetentionDays = %v, want one defaulting to 30 days", param)
	}

	format, _ := als["Format"].(string)
	// Free text (an error message) may only be logged in API Gateway's
	// escaped form, which brings its own quotes: a raw one inside a JSON
	// string lets its text forge fields of the record.
	for _, raw := range []string{`"$context.error.message"`, "$context.authorizer.error"} {
		if strings.Contains(format, raw) {
			t.Errorf("access log puts %s unescaped inside a JSON string; use $context.error.messageString or leave it out", raw)
		}
	}
	var fields map[string]string
	quoted := strings.ReplaceAll(format, "$context.error.messageString", `"$context.error.messageString"`)
	if err := json.Unmarshal([]byte(quoted), &fields); err != nil {
		t.Fatalf("access log Format is not a JSON object of strings (%v): %s", err, format)
	}
	var vars []string
	for k, v := range fields {
		found := logVariable.FindAllString(v, -1)
		if len(found) == 0 {
			t.Errorf("field %q = %q names no $context variable", k, v)
		}
		vars = append(vars, found...)
	}
	for _, v := range vars {
		if accessLogForbidden.MatchString(v) {
			t.Errorf("access log field %s would log what the caller sent (query string, headers, path, body)", v)
		}
	}
	for _, want := range accessLogRequired {
		if !slices.Contains(vars, want) {
			t.Errorf("access log lacks %s", want)
		}
	}
	if strings.Contains(format, "$context.path") {
		t.Error("access log names $context.path: the raw path carries task ids; the route key names the route")
	}
}

// TestAccessLogCheckCatchesLeaks proves the forbidden-field check bites.
func TestAccessLogCheckCatchesLeaks(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"$context.querystring", "$request.header.Authorization", "$context.path", "$request.querystring.x", "$context.identity.userAgent", "$request.path.id", "$input.body"} {
		if !accessLogForbidden.MatchString(v) {
			t.Errorf("%s is not caught", v)
		}
	}
	for _, v := range accessLogRequired {
		if accessLogForbidden.MatchString(v) {
			t.Errorf("required field %s is caught as forbidden", v)
		}
	}
}
