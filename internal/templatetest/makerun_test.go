package templatetest

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// submitSettingsMakeRunTakesOtherwise are the variables the deployed
// submit function reads that `make run` (cmd/taskledger-local) does not
// read under that name, each with what stands for it locally. Every other
// variable the function reads, make run must read too: a setting that
// changes what the API allows (the approver policy was one) has to be
// triable on the local stack.
var submitSettingsMakeRunTakesOtherwise = map[string]string{
	"AUTH_MODE":                     "follows TASKLEDGER_OIDC_ISSUER: jwt behind the emulated JWT authorizer, else none",
	"OIDC_ISSUER":                   "TASKLEDGER_OIDC_ISSUER",
	"OIDC_CLIENT_ID":                "TASKLEDGER_OIDC_CLIENT_ID (default: the first TASKLEDGER_OIDC_AUDIENCE)",
	"OIDC_AUTHORIZATION_ENDPOINT":   "none: the page uses the issuer's discovered authorization endpoint (the override exists for the Cognito hosted UI, which make run does not emulate)",
	"TASKS_TABLE":                   "created by the stack from template.yaml (TASKLEDGER_PREFIX)",
	"REVIEW_TABLE":                  "created by the stack from template.yaml (TASKLEDGER_PREFIX)",
	"WATCH_TABLE":                   "created by the stack from template.yaml (TASKLEDGER_PREFIX)",
	"TASK_QUEUE_URL":                "created by the stack from template.yaml (TASKLEDGER_PREFIX)",
	"PAYLOAD_BUCKET":                "created by the stack from template.yaml (TASKLEDGER_PREFIX)",
	"TASK_ID_KEY_SECRET_ARN":        "TASK_ID_KEY, the key itself (default: a random key per process)",
	"DELIVERY_EVENT_BUS_ARN":        "the stack's delivery bus; make run has none: TASKLEDGER_DESTINATIONS names a bus on the endpoint",
	"DELIVERY_EXAMPLE_FUNCTION_ARN": "make run starts the example function itself under aws-lambda-rie and registers it as \"example\" (TASKLEDGER_EXAMPLE_DESTINATION=off: not)",
	"STREAM_URL":                    "make run's own emulated WebSocket API (STREAM_ADDR), whose URL it advertises itself",
}

// TestMakeRunReadsWhatSubmitReads compares, statically, the environment the
// submit function reads with what cmd/taskledger-local reads.
func TestMakeRunReadsWhatSubmitReads(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	submit := codeFacts(t, tpl)["SubmitFunction"].env
	local, err := analyse(moduleRoot(t), "./cmd/taskledger-local", tpl.LogicalIDs("AWS::DynamoDB::Table"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(submit)) {
		if local.env[name] != nil || notSetByTemplate[name] != "" {
			continue
		}
		if submitSettingsMakeRunTakesOtherwise[name] == "" {
			t.Errorf("the submit function reads %s (%s) but make run ignores it: read it in cmd/taskledger-local (local.Options) or list what stands for it in submitSettingsMakeRunTakesOtherwise", name, strings.Join(submit[name], ", "))
		}
	}
	for name, why := range submitSettingsMakeRunTakesOtherwise {
		switch {
		case submit[name] == nil:
			t.Errorf("submitSettingsMakeRunTakesOtherwise lists %s (%s) but the submit function no longer reads it", name, why)
		case local.env[name] != nil:
			t.Errorf("submitSettingsMakeRunTakesOtherwise lists %s (%s) but make run reads it (%s): drop the entry", name, why, strings.Join(local.env[name], ", "))
		}
	}
}
