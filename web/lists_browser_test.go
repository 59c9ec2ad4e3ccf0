package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// holdRetryMarker in a generate task's input makes holdRetries keep it in
// retry_wait after its first attempt (web/test/lists.mjs puts it in a
// prompt).
const holdRetryMarker = "hold-retry"

// holdRetries wraps the worker: a task whose input carries holdRetryMarker
// and that has made an attempt is reported back as a batch item failure
// (its message returns after the queue's visibility timeout, as with a
// throttled worker), so it stays in retry_wait for the page to show.
func holdRetries(led *atomic.Pointer[ledger.Ledger]) func(local.SQSDeliver) local.SQSDeliver {
	hold := func(ctx context.Context, body string) bool {
		l := led.Load()
		var m dispatch.Message
		if l == nil || json.Unmarshal([]byte(body), &m) != nil {
			return false
		}
		t, err := l.Get(ctx, m.TaskID)
		return err == nil && t.Attempts > 0 && strings.Contains(t.Input, holdRetryMarker)
	}
	return func(next local.SQSDeliver) local.SQSDeliver {
		return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var pass []events.SQSMessage
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				if hold(ctx, m.Body) {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
					continue
				}
				pass = append(pass, m)
			}
			if len(pass) == 0 {
				return resp, nil
			}
			r, err := next(ctx, events.SQSEvent{Records: pass})
			r.BatchItemFailures = append(r.BatchItemFailures, resp.BatchItemFailures...)
			return r, err
		}
	}
}

// TestListsBrowser drives "My tasks" and "Waiting for my decision" in
// headless Chromium on a local stack (web/test/lists.mjs: newest first,
// filters, progress, a reload, live updates, Load more; the inbox's result
// beside its plan, deadlines, load, reject and approve) and then checks in
// the ledger that the decisions the page made are the ones recorded.
// Screenshots: lists-*.png in the screenshot dir (TASKLEDGER_SCREENSHOTS,
// default web/test/screenshots).
func TestListsBrowser(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	var led atomic.Pointer[ledger.Ledger]
	s := startStack(ctx, t, local.Options{
		WrapWorker:   holdRetries(&led),
		Destinations: deliver.Config{Simulated: &deliver.SimulatedConfig{}},
	})
	led.Store(s.Ledger)

	var rep approvalReport
	runScript(ctx, t, node, "lists.mjs", &rep, s.URL, shotDir(t))
	checkScreenshots(t, rep.Screenshots, 7)

	get := func(name string) *ledger.Task {
		t.Helper()
		id := rep.Tasks[name]
		if id == "" {
			t.Fatalf("report names no %q task: %v", name, rep.Tasks)
		}
		task, err := s.Ledger.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s task %s: %v", name, id, err)
		}
		return task
	}

	if r := get("retrying"); r.State != ledger.StateRetryWait || r.Attempts != 1 {
		t.Errorf("held task: %s after %d attempts, want retry_wait after 1", r.State, r.Attempts)
	}
	// Approved from the inbox: of the hash the page showed, with its note,
	// one delivery (the one the page opened).
	ap := get("approved")
	if ap.State != ledger.StateCompleted || ap.ApprovalState != ledger.ApprovalApproved || ap.ApprovalSHA256 != rep.Hashes["approved"] || ap.ApprovalNote != "approved from the inbox" {
		t.Errorf("approved task: state %s, approval %s of %s, note %q; want completed, approved of %s, \"approved from the inbox\"",
			ap.State, ap.ApprovalState, ap.ApprovalSHA256, ap.ApprovalNote, rep.Hashes["approved"])
	}
	if len(ap.DeliveryIDs) != 1 || ap.DeliveryIDs[0] != rep.Tasks["delivery"] {
		t.Errorf("approved task's deliveries %v, want [%s]", ap.DeliveryIDs, rep.Tasks["delivery"])
	}
	// Approved from a stale item: refused, then approved of the current
	// result the page showed after the 409.
	if st := get("stale"); st.State != ledger.StateCompleted || st.ApprovalSHA256 != rep.Hashes["current"] || st.ApprovalSHA256 == rep.Hashes["stale"] {
		t.Errorf("stale task: %s, approved %s; want completed, approved of the current %s (not the stale %s)", st.State, st.ApprovalSHA256, rep.Hashes["current"], rep.Hashes["stale"])
	}
	if rj := get("rejected"); rj.State != ledger.StateRejected || rj.ApprovalNote != "not this week" || len(rj.DeliveryIDs) != 0 {
		t.Errorf("rejected task: state %s, note %q, deliveries %v; want rejected, \"not this week\", none", rj.State, rj.ApprovalNote, rj.DeliveryIDs)
	}
}

// TestListsApprover drives the lists with sign-in (web/test/listsapprover.mjs):
// a requester's gated task is listed in her My tasks and not in her inbox
// (an approver claim is set and she has none); an approver sees it in his
// inbox, not in his My tasks, and approves it from there. The ledger then
// holds the approver's decision of the hash his page showed.
func TestListsApprover(t *testing.T) {
	t.Parallel()
	var rep approvalReport
	ctx, s := runWithIssuer(t, "listsapprover.mjs", func(iss issuerLine) local.Options {
		return local.Options{
			OIDCIssuer: iss.Issuer, OIDCAudience: []string{iss.ClientID},
			Approvals:    api.ApprovalPolicy{Claim: "groups", Value: "approvers", NoSelfApproval: true},
			Destinations: deliver.Config{Simulated: &deliver.SimulatedConfig{}},
		}
	}, &rep)
	checkScreenshots(t, rep.Screenshots, 2)
	task, err := s.Ledger.Get(ctx, rep.Tasks["gated"])
	if err != nil {
		t.Fatalf("gated task: %v", err)
	}
	if task.State != ledger.StateCompleted || task.ApprovalSHA256 != rep.Hashes["approved"] || !strings.Contains(task.DecidedBy, "carol") ||
		len(task.DeliveryIDs) != 1 || task.DeliveryIDs[0] != rep.Tasks["delivery"] {
		t.Errorf("gated task: %s, approved %s by %q, deliveries %v; want completed, %s by carol, [%s]",
			task.State, task.ApprovalSHA256, task.DecidedBy, task.DeliveryIDs, rep.Hashes["approved"], rep.Tasks["delivery"])
	}
}

// TestListsLogic runs the lists' pure logic tests (web/test/listlib.test.mjs)
// with node's test runner.
func TestListsLogic(t *testing.T) {
	t.Parallel()
	runNodeTests(t, "listlib.test.mjs")
}
