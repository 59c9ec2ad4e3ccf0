package lambdaenv

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/taskledger/taskledger/internal/destination"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

const bus = "arn:aws:events:us-east-1:123456789012:event-bus/taskledger-deliveries"

func TestDestinationsFromEnvironment(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1"}
	// The stack's bus becomes the eventbridge destination; simulated ones
	// come from the JSON.
	reg, err := Destinations(cfg, envOf(map[string]string{
		"TASKLEDGER_DESTINATIONS": `{"simulated":{"names":["notify"]}}`,
		EnvDeliveryEventBusARN:    bus,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.Names(), ","); got != "eventbridge,notify" {
		t.Fatalf("names %q, want eventbridge,notify", got)
	}
	// A webhook secret the role may not read stops the start.
	hooks := `{"webhooks":{"crm":{"url":"https://crm.example.com/h","secret_id":"arn:aws:secretsmanager:us-east-1:123456789012:secret:crm"}}}`
	if _, err := Destinations(cfg, envOf(map[string]string{"TASKLEDGER_DESTINATIONS": hooks})); err == nil || !strings.Contains(err.Error(), EnvDeliveryWebhookSecretARNs) {
		t.Fatalf("unlisted webhook secret: %v", err)
	}
	reg, err = Destinations(cfg, envOf(map[string]string{"TASKLEDGER_DESTINATIONS": hooks,
		EnvDeliveryWebhookSecretARNs: "arn:aws:secretsmanager:us-east-1:123456789012:secret:other,arn:aws:secretsmanager:us-east-1:123456789012:secret:crm"}))
	if err != nil || strings.Join(reg.Names(), ",") != "webhook" {
		t.Fatalf("listed webhook secret: %v %v", reg.Names(), err)
	}
	// A bus other than the stack's is refused: the role may put events on
	// that one only.
	other := `{"eventbridge":{"bus_arn":"arn:aws:events:us-east-1:123456789012:event-bus/elsewhere"}}`
	if _, err := Destinations(cfg, envOf(map[string]string{"TASKLEDGER_DESTINATIONS": other, EnvDeliveryEventBusARN: bus})); err == nil {
		t.Fatal("a foreign bus was accepted")
	}
	if _, err := Destinations(cfg, envOf(map[string]string{"TASKLEDGER_DESTINATIONS": `{"simulated":{"nmes":[]}}`})); err == nil {
		t.Fatal("a misspelt field was accepted")
	}
	// Nothing configured: an empty registry (deliver submits refused).
	if reg, err := DestinationChecker(envOf(map[string]string{})); err != nil || len(reg.Names()) != 0 {
		t.Fatalf("empty: %v %v", reg.Names(), err)
	}
}

func TestLambdaAndEmailDestinationsNeedTheRoleToAllowThem(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1"}
	const orders = "arn:aws:lambda:us-east-1:123456789012:function:orders"
	fns := `{"lambda":{"functions":{"orders":{"function":"` + orders + `"}}}}`
	if _, err := Destinations(cfg, envOf(map[string]string{"TASKLEDGER_DESTINATIONS": fns})); err == nil || !strings.Contains(err.Error(), EnvDeliveryLambdaFunctionARNs) {
		t.Fatalf("unlisted function: %v", err)
	}
	reg, err := Destinations(cfg, envOf(map[string]string{"TASKLEDGER_DESTINATIONS": fns, EnvDeliveryLambdaFunctionARNs: "arn:aws:lambda:us-east-1:123456789012:function:x, " + orders}))
	if err != nil || strings.Join(reg.Names(), ",") != "lambda" {
		t.Fatalf("listed function: %v %v", reg.Names(), err)
	}

	mail := `{"email":{"from":"Orders <noreply@mail.example.com>","allowed_recipients":["ops@example.com"]}}`
	for identity, ok := range map[string]bool{"": false, "example.com": false, "other@mail.example.com": false, "mail.example.com": true, "noreply@mail.example.com": true} {
		_, err := Destinations(cfg, envOf(map[string]string{"TASKLEDGER_DESTINATIONS": mail, EnvDeliveryEmailIdentity: identity}))
		if (err == nil) != ok {
			t.Errorf("identity %q: %v, want accepted=%t", identity, err, ok)
		}
	}

	// The stack's example function is registered as "example", allowed by
	// the template itself, with its readback; the submit checker knows it.
	const example = "arn:aws:lambda:us-east-1:123456789012:function:stack-ExampleDestinationFunction"
	env := envOf(map[string]string{EnvDeliveryExampleFunctionARN: example})
	if _, err := Destinations(cfg, env); err != nil {
		t.Fatal(err)
	}
	checker, err := DestinationChecker(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := checker.Check(destinationInput("lambda", `{"function":"example"}`)); err != nil {
		t.Fatalf("the example function is not a configured destination: %v", err)
	}
}

func destinationInput(name, params string) destination.DeliverInput {
	return destination.DeliverInput{Destination: name, Params: json.RawMessage(params)}
}
