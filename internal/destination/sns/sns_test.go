package sns_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/internal/emutest"
	"github.com/taskledger/taskledger/internal/destination/sns"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestMain(m *testing.M) { emutest.Main(m) }

const payload = `{"text":"Task t_1 has completed.","link":"https://tasks.example.com/#task=t_1"}`

func req(opID, params string) destination.Request {
	return destination.Request{OperationID: opID, Attempt: 1, Destination: sns.Name, Params: json.RawMessage(params),
		Payload: json.RawMessage(payload), Provenance: &destination.Provenance{Type: destination.ProvenanceNotification, TaskID: "t_1", Event: "completed"}}
}

// topicWithQueue creates a topic and an SQS queue subscribed to it, and
// returns the topic's ARN and a function that waits for the queue's next
// message body (the SNS envelope's Message).
func topicWithQueue(t *testing.T, be emutest.Backend, name string) (string, func() string) {
	t.Helper()
	ctx := context.Background()
	sc, qc := awssns.NewFromConfig(be.AWS), sqs.NewFromConfig(be.AWS)
	topic, err := sc.CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := qc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := qc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Subscribe(ctx, &awssns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(attrs.Attributes["QueueArn"])}); err != nil {
		t.Fatal(err)
	}
	return *topic.TopicArn, func() string {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			out, err := qc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1, MaxNumberOfMessages: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				var env struct{ Message string }
				if json.Unmarshal([]byte(aws.ToString(m.Body)), &env) == nil && env.Message != "" {
					return env.Message
				}
				return aws.ToString(m.Body)
			}
		}
		return ""
	}
}

// A delivery publishes one message to the configured topic, carrying the
// payload's text, the operation id and the provenance; the receipt names
// the topic and SNS's message id.
func TestDeliverPublishesToTheNamedTopic(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		arn, next := topicWithQueue(t, be, "tl-sns-deliver")
		d, err := sns.New(sns.Options{Topics: map[string]string{"approvals": arn}, Client: awssns.NewFromConfig(be.AWS)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Deliver(context.Background(), req("t_op1", `{"topic":"approvals","subject":"taskledger: task t_1 has completed"}`))
		if err != nil {
			t.Fatalf("Deliver = %v", err)
		}
		if r.ProviderRef == "" || r.DestinationIdentity != arn || r.OperationID != "t_op1" {
			t.Fatalf("receipt = %+v", r)
		}
		msg := next()
		for _, want := range []string{"Task t_1 has completed.", "operation t_op1", `"type":"notification"`} {
			if !strings.Contains(msg, want) {
				t.Fatalf("published message %q lacks %q", msg, want)
			}
		}
	})
}

// A topic name outside the configuration is refused before any call, and
// at submit (CheckParams); a topic that does not exist is a configuration
// fault for a person, not a retry.
func TestDeliverRefusesTopicsOutsideTheConfiguration(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		missing := "arn:aws:sns:us-east-1:000000000000:tl-sns-missing"
		d, err := sns.New(sns.Options{Topics: map[string]string{"gone": missing}, Client: awssns.NewFromConfig(be.AWS)})
		if err != nil {
			t.Fatal(err)
		}
		var pe *destination.ParamsError
		if err := d.CheckParams(json.RawMessage(`{"topic":"other"}`)); !errors.As(err, &pe) || pe.Field != "topic" {
			t.Fatalf("CheckParams(other) = %v, want a ParamsError on topic", err)
		}
		_, err = d.Deliver(context.Background(), req("t_op2", `{"topic":"gone"}`))
		if c := retrypolicy.Classify(err).Class; c != retrypolicy.PermanentConfig {
			t.Fatalf("Deliver to a missing topic = %v (class %s), want misconfigured", err, c)
		}
	})
}

// A Publish whose reply is lost may have published: uncertain, never a
// retry (the SDK's own retries are off for the call).
func TestLostPublishReplyIsUncertain(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		arn, next := topicWithQueue(t, be, "tl-sns-lost")
		cfg := be.AWS.Copy()
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation == "Publish" {
				return faultinject.LostReply
			}
			return ""
		}))
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
		d, err := sns.New(sns.Options{Topics: map[string]string{"approvals": arn}, Client: awssns.NewFromConfig(cfg)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Deliver(context.Background(), req("t_op3", `{"topic":"approvals"}`))
		if c := retrypolicy.Classify(err).Class; c != retrypolicy.UnknownOutcome {
			t.Fatalf("Deliver with a lost reply = %v (class %s), want uncertain", err, c)
		}
		if msg := next(); !strings.Contains(msg, "operation t_op3") {
			t.Fatalf("the lost reply's publish was not performed: %q", msg)
		}
	})
}
