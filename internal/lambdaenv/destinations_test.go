package lambdaenv

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
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
