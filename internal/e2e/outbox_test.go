package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// lostSend stands for an SQS send that fails after the task was recorded
// (or a submit Lambda that dies between the put and the send).
type lostSend struct{}

func (lostSend) Send(context.Context, string, string, time.Duration) error {
	return errors.New("injected: SendMessage failed after the put")
}

// A submit whose SQS send is lost still answers 202, and the task is
// completed later: the reconciler's outbox relay re-sends it once its
// dispatch deadline passes, and the worker completes it with one side effect.
func TestLostSendIsCompletedThroughTheOutboxRelay(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		// The SDK omits WaitTimeSeconds=0, so a receive would long-poll for
		// the queue's 20 s default: make this test's queue short-poll.
		if _, err := e.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
			QueueUrl:   aws.String(e.Names.TaskQueueURL),
			Attributes: map[string]string{"ReceiveMessageWaitTimeSeconds": "0"},
		}); err != nil {
			t.Fatal(err)
		}
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, WatchTable: e.Names.WatchTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		prov := simulated.New(simulated.Options{Seed: 1, Clock: clock.Now})
		sender := &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}

		submit := &api.Handler{Ledger: l, Dispatch: lostSend{}}
		resp, _ := submit.Handle(ctx, events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "POST /tasks", RawPath: "/tasks",
			Headers: map[string]string{"content-type": "application/json", "idempotency-key": "lost-send-1"},
			Body:    `{"kind":"generate","input":{"prompt":"hello"}}`,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/tasks"},
			},
		})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit with a lost send = %d %s; want 202 (the task is durable)", resp.StatusCode, resp.Body)
		}
		var view struct {
			TaskID string `json:"task_id"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &view); err != nil || view.TaskID == "" {
			t.Fatalf("task view %q: %v", resp.Body, err)
		}
		if msgs := receive(t, e, 0); len(msgs) != 0 {
			t.Fatalf("%d messages on the queue after a lost send", len(msgs))
		}

		// Before the dispatch deadline the relay leaves it alone.
		rec := &reconciler.Handler{Ledger: l, Dispatch: sender, Provider: prov, DLQ: e.SQS, DLQURL: e.Names.DeadLetterQueueURL}
		if sum, err := rec.Handle(ctx, json.RawMessage(`{}`)); err != nil || sum.Resent != 0 {
			t.Fatalf("reconciler before the deadline: resent %d, %v", sum.Resent, err)
		}
		clock.Advance(l.Config().DispatchTimeout + time.Second)
		if sum, err := rec.Handle(ctx, json.RawMessage(`{}`)); err != nil || sum.Resent != 1 {
			t.Fatalf("reconciler after the deadline: resent %d, %v; want 1", sum.Resent, err)
		}

		msgs := receive(t, e, 1)
		if len(msgs) != 1 {
			t.Fatalf("%d messages after the relay, want 1", len(msgs))
		}
		w := &worker.Handler{Ledger: l, Provider: prov, SQS: e.SQS, QueueURL: e.Names.TaskQueueURL, Policy: retrypolicy.Default()}
		out, err := w.Handle(ctx, events.SQSEvent{Records: msgs})
		if err != nil || len(out.BatchItemFailures) != 0 {
			t.Fatalf("worker: %+v, %v", out, err)
		}
		got, err := l.Get(ctx, view.TaskID)
		if err != nil || got.State != ledger.StateCompleted || got.Result == "" || got.Dispatches != 1 {
			t.Fatalf("task after the relay and the worker: %+v, %v", got, err)
		}
		if n := prov.SideEffects(view.TaskID); n != 1 {
			t.Fatalf("provider side effects = %d, want 1", n)
		}
	})
}

// receive reads up to 10 messages (waiting up to wait seconds) as the SQS
// event source would hand them to the worker.
func receive(t *testing.T, e *testenv.Env, wait int32) []events.SQSMessage {
	t.Helper()
	out, err := e.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(e.Names.TaskQueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: wait,
		VisibilityTimeout: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.SQSMessage
	for _, m := range out.Messages {
		msgs = append(msgs, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), EventSource: "aws:sqs",
		})
	}
	return msgs
}
