package lambdaenv

import (
	"fmt"
	"net/mail"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/followup"
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
	// EnvDeliveryLambdaFunctionARNs lists (comma separated) the functions
	// the role may invoke: every lambda destination function must be one
	// of them (the template's DeliveryLambdaFunctionArns).
	EnvDeliveryLambdaFunctionARNs = "DELIVERY_LAMBDA_FUNCTION_ARNS"
	// EnvDeliveryExampleFunctionARN is the stack's example destination
	// function (DeployExampleDestination), registered as the lambda
	// function "example" unless the configuration names one.
	EnvDeliveryExampleFunctionARN = "DELIVERY_EXAMPLE_FUNCTION_ARN"
	// EnvDeliveryEmailIdentity is the SES identity (an address or a domain)
	// the role may send as: the email destination's sender must be it or
	// an address in it (the template's DeliveryEmailIdentity).
	EnvDeliveryEmailIdentity = "DELIVERY_EMAIL_IDENTITY"
	// EnvDeliverySNSTopicARNs lists (comma separated) the topics the role
	// may publish to: every sns destination topic must be one of them
	// (the template's DeliverySnsTopicArns).
	EnvDeliverySNSTopicARNs = "DELIVERY_SNS_TOPIC_ARNS"
)

// ExampleFunction is the lambda function name the stack's example
// destination function is registered under.
const ExampleFunction = "example"

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
	if arn := strings.TrimSpace(getenv(EnvDeliveryExampleFunctionARN)); arn != "" {
		if c.Lambda == nil {
			c.Lambda = &deliver.LambdaConfig{}
		}
		if c.Lambda.Functions == nil {
			c.Lambda.Functions = map[string]deliver.LambdaFunction{}
		}
		if _, named := c.Lambda.Functions[ExampleFunction]; !named {
			// The example keeps a DynamoDB record per operation id, written
			// with its effect and read back consistently: its "not found"
			// is credible.
			c.Lambda.Functions[ExampleFunction] = deliver.LambdaFunction{Function: arn, Lookup: true, NotFoundCredible: true}
		}
	}
	return c, nil
}

func splitList(v string) []string {
	var out []string
	for a := range strings.SplitSeq(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// checkAllowed refuses, at start, a destination the function's role could
// not use: a lambda function not in DELIVERY_LAMBDA_FUNCTION_ARNS (or the
// stack's example), a sender outside DELIVERY_EMAIL_IDENTITY, an SNS topic
// not in DELIVERY_SNS_TOPIC_ARNS.
func checkAllowed(c deliver.Config, getenv func(string) string) error {
	allowed := splitList(getenv(EnvDeliveryLambdaFunctionARNs))
	if arn := strings.TrimSpace(getenv(EnvDeliveryExampleFunctionARN)); arn != "" {
		allowed = append(allowed, arn)
	}
	for _, fn := range c.LambdaFunctionNames() {
		if !slices.Contains(allowed, fn) {
			return fmt.Errorf("%s: lambda function %q is not in %s (the template's DeliveryLambdaFunctionArns): the function's role cannot invoke it", deliver.EnvVar, fn, EnvDeliveryLambdaFunctionARNs)
		}
	}
	if c.SNS != nil {
		topics := splitList(getenv(EnvDeliverySNSTopicARNs))
		for name, arn := range c.SNS.Topics {
			if !slices.Contains(topics, arn) {
				return fmt.Errorf("%s: sns topic %s (%q) is not in %s (the template's DeliverySnsTopicArns): the function's role cannot publish to it", deliver.EnvVar, name, arn, EnvDeliverySNSTopicARNs)
			}
		}
	}
	if c.Email != nil {
		identity := strings.ToLower(strings.TrimSpace(getenv(EnvDeliveryEmailIdentity)))
		from, err := mail.ParseAddress(c.Email.From)
		if err != nil {
			return fmt.Errorf("%s: email.from %q is not an email address", deliver.EnvVar, c.Email.From)
		}
		addr := strings.ToLower(from.Address)
		_, domain, _ := strings.Cut(addr, "@")
		if identity == "" || (addr != identity && domain != identity) {
			return fmt.Errorf("%s: email.from %q is not the SES identity %s=%q (the template's DeliveryEmailIdentity): the function's role may send only as that identity", deliver.EnvVar, from.Address, EnvDeliveryEmailIdentity, identity)
		}
	}
	return nil
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
	allowed := splitList(getenv(EnvDeliveryWebhookSecretARNs))
	for _, id := range c.WebhookSecretIDs() {
		if !slices.Contains(allowed, id) {
			return nil, fmt.Errorf("%s: webhook secret %q is not in %s (the template's DeliveryWebhookSecretArns): the function's role cannot read it", deliver.EnvVar, id, EnvDeliveryWebhookSecretARNs)
		}
	}
	if err := checkAllowed(c, getenv); err != nil {
		return nil, err
	}
	var deps deliver.Deps
	if c.Lambda != nil {
		deps.Lambda = awslambda.NewFromConfig(cfg)
	}
	if c.Email != nil {
		deps.SES = sesv2.NewFromConfig(cfg)
	}
	if c.SNS != nil {
		deps.SNS = awssns.NewFromConfig(cfg)
	}
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

// Notifications reads who is notified of what (followup.EnvVar) and checks
// it against the destinations reg serves; nil when nobody is.
func Notifications(getenv func(string) string, reg *deliver.Registry) (*followup.Config, error) {
	c, err := followup.Parse(getenv(followup.EnvVar))
	if err != nil {
		return nil, err
	}
	var chk followup.Checker
	if reg != nil {
		chk = reg
	}
	if err := c.Check(chk); err != nil {
		return nil, err
	}
	return c, nil
}
