package lambdaenv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/taskledger/taskledger/internal/deliver"
)

// Environment of the deliver destinations (DESIGN §10; template.yaml).
const (
	// EnvDeliveryEventBusARN is the stack's delivery bus: the EventBridge
	// destination's bus, the only one the worker may put events on.
	EnvDeliveryEventBusARN = "DELIVERY_EVENT_BUS_ARN"
	// EnvDeliveryWebhookSecretARNs lists (comma separated) the secrets the
	// function's role may read: every webhook endpoint's secret_id must be
	// one of them.
	EnvDeliveryWebhookSecretARNs = "DELIVERY_WEBHOOK_SECRET_ARNS"
)

// destinationsConfig reads TASKLEDGER_DESTINATIONS and adds the stack's
// delivery bus.
func destinationsConfig(getenv func(string) string) (deliver.Config, error) {
	c, err := deliver.ParseConfig(getenv(deliver.EnvVar))
	if err != nil {
		return c, err
	}
	bus := getenv(EnvDeliveryEventBusARN)
	switch {
	case c.EventBridge != nil && c.EventBridge.BusARN != bus:
		return c, fmt.Errorf("%s names an EventBridge bus other than %s=%q: the function may put events only on the stack's delivery bus", deliver.EnvVar, EnvDeliveryEventBusARN, bus)
	case c.EventBridge == nil && bus != "":
		c.EventBridge = &deliver.EventBridgeConfig{BusARN: bus}
	}
	return c, nil
}

// Destinations builds the worker's and the reconciler's destination
// registry from the environment. A webhook secret the function's role may
// not read (not in DELIVERY_WEBHOOK_SECRET_ARNS) is a configuration error
// at start, not an AccessDenied at the first delivery.
func Destinations(cfg aws.Config, getenv func(string) string) (*deliver.Registry, error) {
	c, err := destinationsConfig(getenv)
	if err != nil {
		return nil, err
	}
	var allowed []string
	for a := range strings.SplitSeq(getenv(EnvDeliveryWebhookSecretARNs), ",") {
		if a = strings.TrimSpace(a); a != "" {
			allowed = append(allowed, a)
		}
	}
	for _, id := range c.WebhookSecretIDs() {
		if !slices.Contains(allowed, id) {
			return nil, fmt.Errorf("%s: webhook secret %q is not in %s (the template's DeliveryWebhookSecretArns): the function's role cannot read it", deliver.EnvVar, id, EnvDeliveryWebhookSecretARNs)
		}
	}
	var deps deliver.Deps
	if len(c.Webhooks) > 0 {
		deps.Secrets = secretsmanager.NewFromConfig(cfg)
	}
	if c.EventBridge != nil {
		deps.EventBridge = awseb.NewFromConfig(cfg)
	}
	return deliver.Build(c, deps)
}

// DestinationChecker builds the submit function's registry: it checks
// deliver inputs against the configured destinations and cannot deliver.
func DestinationChecker(getenv func(string) string) (*deliver.Registry, error) {
	c, err := destinationsConfig(getenv)
	if err != nil {
		return nil, err
	}
	return deliver.BuildChecker(c)
}
