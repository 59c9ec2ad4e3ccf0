package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// holdMarker in a generate task's input makes holdDeliveries keep its
// deliveries from the worker (web/test/approval.mjs puts it in a prompt).
const holdMarker = "hold-deliveries"

// approvalReport is what web/test/approval.mjs prints as its last line.
type approvalReport struct {
	report
	Hashes map[string]string `json:"hashes"`
}

// holdDeliveries wraps the worker: a deliver task whose generate task's
// input carries holdMarker is reported back as a batch item failure (the
// message returns after the queue's visibility timeout, as with a
// throttled worker), so the delivery stays unstarted; everything else
// goes to the worker. held counts the messages held back.
func holdDeliveries(led *atomic.Pointer[ledger.Ledger], held *atomic.Int64) func(local.SQSDeliver) local.SQSDeliver {
	hold := func(ctx context.Context, body string) bool {
		l := led.Load()
		var m dispatch.Message
		if l == nil || json.Unmarshal([]byte(body), &m) != nil {
			return false
		}
		t, err := l.Get(ctx, m.TaskID)
		if err != nil || t.Kind != ledger.KindDeliver || t.ParentTaskID == "" {
			return false
		}
		p, err := l.Get(ctx, t.ParentTaskID)
		return err == nil && strings.Contains(p.Input, holdMarker)
	}
	return func(next local.SQSDeliver) local.SQSDeliver {
		return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var pass []events.SQSMessage
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				if hold(ctx, m.Body) {
					held.Add(1)
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

// TestBrowserApproval drives the page's approval gate in headless Chromium
// on a local stack (web/test/approval.mjs: approve, a refused withdraw,
// the delivery's receipt view, edit & approve, withdraw, a stale-hash 409,
// reject) and then checks in the ledger that what the page showed is what
// happened. Screenshots: approval-*.png in the screenshot dir
// (TASKLEDGER_SCREENSHOTS, default web/test/screenshots).
func TestBrowserApproval(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	var led atomic.Pointer[ledger.Ledger]
	var held atomic.Int64
	s := startStack(ctx, t, local.Options{
		WrapWorker: holdDeliveries(&led, &held),
		// make run's destinations: the deliveries the test does not hold
		// back are delivered, with receipts.
		Destinations: deliver.Config{Simulated: &deliver.SimulatedConfig{}},
	})
	led.Store(s.Ledger)

	var rep approvalReport
	runScript(ctx, t, node, "approval.mjs", &rep, s.URL, shotDir(t))
	checkScreenshots(t, rep.Screenshots, 8)

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

	// Approved from the page: one delivery, of the hash the page showed,
	// decided with the page's note; the refused withdraw changed nothing.
	ap := get("approved")
	if ap.State != ledger.StateCompleted || ap.ApprovalState != ledger.ApprovalApproved || ap.ApprovalSHA256 != rep.Hashes["approved"] || ap.ApprovalNote != "looks right" {
		t.Errorf("approved task: state %s, approval %s of %s, note %q; want completed, approved of %s, \"looks right\"",
			ap.State, ap.ApprovalState, ap.ApprovalSHA256, ap.ApprovalNote, rep.Hashes["approved"])
	}
	if len(ap.DeliveryIDs) != 1 || ap.DeliveryIDs[0] != rep.Tasks["delivery"] {
		t.Errorf("approved task's deliveries %v, want [%s]", ap.DeliveryIDs, rep.Tasks["delivery"])
	}
	if d := get("delivery"); d.Kind != ledger.KindDeliver || d.ParentTaskID != ap.TaskID || d.State == ledger.StateQueued || d.State == ledger.StateCancelled {
		t.Errorf("delivery: kind %s, parent %s, state %s; want a started deliver task of %s", d.Kind, d.ParentTaskID, d.State, ap.TaskID)
	}

	// Edited, withdrawn, edited again by a second reviewer and withdrawn:
	// awaiting approval of the second edit, the generated result kept, the
	// page's stale approval refused, both deliveries cancelled unstarted.
	ed := get("edited")
	if ed.State != ledger.StateAwaitingApproval || ed.ApprovalState != ledger.ApprovalWithdrawn {
		t.Errorf("edited task: state %s, approval %s; want awaiting_approval, withdrawn", ed.State, ed.ApprovalState)
	}
	// (The page's first edit kept the generated hash: approval.mjs checks
	// it. Which one the ledger keeps after a second edit is the ledger's
	// business, so only "one is kept" is asserted here.)
	if ed.GeneratedSHA256 == "" || ed.GeneratedSHA256 == ed.ResultSHA256 || ed.ResultSHA256 != rep.Hashes["current"] || ed.ResultSHA256 == rep.Hashes["edited"] {
		t.Errorf("edited task: generated %s, result %s; want a generated hash kept, result %s (not the page's stale %s)",
			ed.GeneratedSHA256, ed.ResultSHA256, rep.Hashes["current"], rep.Hashes["edited"])
	}
	if len(ed.DeliveryIDs) != 0 || len(ed.WithdrawnDeliveryIDs) != 2 {
		t.Errorf("edited task: deliveries %v, withdrawn %v; want none live, 2 withdrawn", ed.DeliveryIDs, ed.WithdrawnDeliveryIDs)
	}
	ds, err := s.Ledger.Deliveries(ctx, ed.WithdrawnDeliveryIDs)
	if err != nil {
		t.Fatalf("withdrawn deliveries: %v", err)
	}
	for _, d := range ds {
		if d.State != ledger.StateCancelled || d.Attempts != 0 {
			t.Errorf("withdrawn delivery %s: state %s after %d attempts; want cancelled, never claimed", d.TaskID, d.State, d.Attempts)
		}
	}
	if held.Load() == 0 {
		t.Error("no delivery was held back from the worker: the withdraw did not race a claim")
	}

	if rj := get("rejected"); rj.State != ledger.StateRejected || rj.ApprovalNote != "not yet public" || len(rj.DeliveryIDs) != 0 {
		t.Errorf("rejected task: state %s, note %q, deliveries %v; want rejected, \"not yet public\", none", rj.State, rj.ApprovalNote, rj.DeliveryIDs)
	}
}
