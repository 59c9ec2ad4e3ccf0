package e2e

import (
	"context"
	"encoding/json"
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

// A gated task across submit, worker, approval and reconciler: the worker's
// result waits for approval; the approval creates the deliveries in its
// transaction and its sends are lost; the outbox relay sends them once
// their dispatch deadline passes.
func TestApprovalDeliveriesReachTheQueueThroughTheRelay(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
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
		call := func(h *api.Handler, method, path, body string, hdr map[string]string) events.APIGatewayV2HTTPResponse {
			headers := map[string]string{"content-type": "application/json"}
			for k, v := range hdr {
				headers[k] = v
			}
			resp, _ := h.Handle(ctx, events.APIGatewayV2HTTPRequest{
				Version: "2.0", RouteKey: "$default", RawPath: path, Headers: headers, Body: body,
				RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}},
			})
			return resp
		}
		var view struct {
			TaskID       string `json:"task_id"`
			State        string `json:"state"`
			ResultSHA256 string `json:"result_sha256"`
			Deliveries   []struct {
				TaskID string `json:"task_id"`
				State  string `json:"state"`
			} `json:"deliveries"`
		}
		submit := &api.Handler{Ledger: l, Dispatch: sender}
		resp := call(submit, http.MethodPost, "/tasks", `{"kind":"generate","input":{"prompt":"summarise"},
			"approval":{"required":true},"deliver":[{"destination":"notify","params":{"to":"a@example.com"}}]}`,
			map[string]string{"idempotency-key": "wf-e2e"})
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &view) != nil {
			t.Fatalf("submit = %d %s", resp.StatusCode, resp.Body)
		}
		w := &worker.Handler{Ledger: l, Provider: prov, SQS: e.SQS, QueueURL: e.Names.TaskQueueURL, Policy: retrypolicy.Default()}
		if out, err := w.Handle(ctx, events.SQSEvent{Records: receive(t, e, 1)}); err != nil || len(out.BatchItemFailures) != 0 {
			t.Fatalf("worker: %+v, %v", out, err)
		}
		resp = call(submit, http.MethodGet, "/tasks/"+view.TaskID, "", nil)
		if json.Unmarshal([]byte(resp.Body), &view) != nil || view.State != string(ledger.StateAwaitingApproval) || view.ResultSHA256 == "" {
			t.Fatalf("after the worker: %s", resp.Body)
		}

		// The approval's delivery send is lost: the delivery is durable.
		approver := &api.Handler{Ledger: l, Dispatch: lostSend{}}
		resp = call(approver, http.MethodPost, "/tasks/"+view.TaskID+"/approve", `{"artifact_sha256":"`+view.ResultSHA256+`"}`, nil)
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &view) != nil || view.State != "completed" || len(view.Deliveries) != 1 {
			t.Fatalf("approve = %d %s", resp.StatusCode, resp.Body)
		}
		if msgs := receive(t, e, 0); len(msgs) != 0 {
			t.Fatalf("%d messages after a lost delivery send", len(msgs))
		}
		rec := &reconciler.Handler{Ledger: l, Dispatch: sender, Provider: prov, DLQ: e.SQS, DLQURL: e.Names.DeadLetterQueueURL}
		clock.Advance(l.Config().DispatchTimeout + time.Second)
		if sum, err := rec.Handle(ctx, json.RawMessage(`{}`)); err != nil || sum.Resent != 1 {
			t.Fatalf("reconciler after the deadline: resent %d, %v; want 1", sum.Resent, err)
		}
		msgs := receive(t, e, 1)
		if len(msgs) != 1 {
			t.Fatalf("%d messages after the relay, want 1", len(msgs))
		}
		m, err := dispatch.Parse(msgs[0].Body)
		if err != nil || m.TaskID != view.Deliveries[0].TaskID {
			t.Fatalf("relayed message %q (%v), want delivery %s", msgs[0].Body, err, view.Deliveries[0].TaskID)
		}
	})
}
