package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination/email"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const ungatedPlan = `{"deliver":[{"destination":"notify","params":{}},{"destination":"crm","params":{}}]}`

// children are the tasks whose parent is id.
func (b *bundle) children(t *testing.T, id string) []ledger.Task { return b.e.Children(t, id) }

func notifyConfig(t *testing.T) *followup.Config {
	t.Helper()
	c, err := followup.Parse(`{"page_origin":"https://tasks.example.com","requester":{"email":true},"approvers":{"email":["approver@example.com"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func requester(n *ledger.NewTask) { n.RequesterEmail = "alice@example.com" }

// A plan that delivers without approval: the worker's completion creates
// its deliveries in the same transaction. The transaction's reply is lost
// (the caller sees a timeout after it applied): the worker recognises its
// own write — the task completed once, each delivery exists once, one
// generation.
func TestPlanDeliveriesAreCreatedOnceWithTheCompletionUnderALostReply(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{NoIdempotency: true, NoReadback: true}))
		ctx := context.Background()
		task := b.create(t, "plan-lost-reply", prompt, func(n *ledger.NewTask) { n.Plan = ungatedPlan })
		inj := b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.TransactWriteItems" && c.TaskID == task.TaskID && c.N == 1 {
				return faultinject.LostReply
			}
			return ""
		})
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatalf("faults injected: %+v", inj.Injected())
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		kids := b.children(t, task.TaskID)
		if len(kids) != 2 || len(got.DeliveryIDs) != 2 {
			t.Fatalf("deliveries: %d tasks, %d listed on the task; want 2 and 2", len(kids), len(got.DeliveryIDs))
		}
		for _, d := range kids {
			if d.State != ledger.StateQueued || d.Kind != ledger.KindDeliver || d.Provenance == nil || d.Provenance.Type != ledger.ProvenancePlan ||
				d.Provenance.ArtifactSHA256 != got.ResultSHA256 || !strings.Contains(d.Input, `"payload":`+got.Result) {
				t.Fatalf("delivery %s: state %s kind %s provenance %+v input %s", d.TaskID, d.State, d.Kind, d.Provenance, d.Input)
			}
		}
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("generations %d, want 1", n)
		}
	})
}

// Each event is notified once: a completion, a failure and a park each
// create exactly one notification (the requester's, by email), and the
// message coming back after the task settled creates none.
func TestEachSettlementNotifiesTheRequesterOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault simulated.Fault
		state ledger.State
		event string
	}{
		{"completed", "", ledger.StateCompleted, followup.EventCompleted},
		{"failed", simulated.BadRequest, ledger.StateFailed, followup.EventFailed},
		{"parked", simulated.Credentials, ledger.StateNeedsReview, followup.EventParked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withHandler(func(h *worker.Handler) { h.Notify = notifyConfig(t) }))
				ctx := context.Background()
				task := b.create(t, "notify-"+c.name, prompt, requester)
				if c.fault != "" {
					b.sim.Script(task.TaskID, c.fault)
				}
				for range 2 { // the second time: the message back after the task settled
					b.send(t, task.TaskID)
					handle(t, b.h, ctx, b.deliver(t, 1, 60))
				}
				got := b.get(t, task.TaskID)
				wantState(t, got, c.state)
				kids := b.children(t, task.TaskID)
				if len(kids) != 1 {
					t.Fatalf("%d notifications, want 1", len(kids))
				}
				n := kids[0]
				version := got.AssignmentVersion
				if c.event == followup.EventParked {
					version = int64(got.ParkCount)
				}
				if n.IdempotencyKey != followup.Key(task.TaskID, c.event, version, followup.EmailDestination) || n.State != ledger.StateQueued ||
					n.Provenance == nil || n.Provenance.Event != c.event ||
					!strings.Contains(n.Input, `"to":["alice@example.com"]`) || !strings.Contains(n.Input, "https://tasks.example.com/#task="+task.TaskID) {
					t.Fatalf("notification %s: key %s state %s provenance %+v input %s", n.TaskID, n.IdempotencyKey, n.State, n.Provenance, n.Input)
				}
			})
		})
	}
}

// A gated task's completion notifies the approvers (not the requester:
// nothing is completed yet).
func TestAwaitingApprovalNotifiesTheApprovers(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *worker.Handler) { h.Notify = notifyConfig(t) }))
		task := b.create(t, "notify-gated", prompt, requester, func(n *ledger.NewTask) { n.ApprovalTTL = time.Hour })
		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		wantState(t, b.get(t, task.TaskID), ledger.StateAwaitingApproval)
		kids := b.children(t, task.TaskID)
		if len(kids) != 1 || kids[0].Provenance.Event != followup.EventAwaitingApproval || !strings.Contains(kids[0].Input, `"to":["approver@example.com"]`) {
			t.Fatalf("notifications %+v, want the approvers' one", kids)
		}
	})
}

// Without a notification configuration and without plan deliveries, the
// completion is the one UpdateItem it always was: no transaction, no
// other task.
func TestNothingIsWrittenForNotificationsWhenNoneAreConfigured(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := b.create(t, "notify-none", prompt, requester)
		var mu sync.Mutex
		var calls []string
		b.faultLedger(t, func(c faultinject.Call) faultinject.Kind {
			if c.TaskID == task.TaskID {
				mu.Lock()
				calls = append(calls, c.Operation)
				mu.Unlock()
			}
			return ""
		})
		b.send(t, task.TaskID)
		handle(t, b.h, context.Background(), b.deliver(t, 1, 60))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		mu.Lock()
		defer mu.Unlock()
		for _, op := range calls {
			if op == "TransactWriteItems" || op == "PutItem" {
				t.Fatalf("the completion without notifications wrote %v", calls)
			}
		}
		if kids := b.children(t, task.TaskID); len(kids) != 0 {
			t.Fatalf("%d follow-up tasks, want none", len(kids))
		}
	})
}

// sentEmails counts the messages the emulator's SES recorded whose body
// contains needle (kumo: /kumo/ses/v2/sent-emails; moto: its data dump).
func sentEmails(t *testing.T, e *testenv.Env, needle string) int {
	t.Helper()
	path := map[string]string{"kumo": "/kumo/ses/v2/sent-emails", "moto": "/moto-api/data.json"}[e.Backend]
	if path == "" {
		t.Skipf("no way to read sent messages on %s", e.Backend)
	}
	// moto walks every model of every service for data.json, and a walk
	// that meets another test's concurrent write fails with a 500 page:
	// read again until it answers JSON.
	var raw []byte
	for try := 0; ; try++ {
		resp, err := http.Get(e.Endpoint + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && json.Valid(raw) {
			break
		}
		if try == 20 {
			t.Fatalf("%s answered %d, not JSON, 20 times: %.200s", path, resp.StatusCode, raw)
		}
		time.Sleep(50 * time.Millisecond) // a retry of a failed read, not a synchronisation
	}
	var bodies []string
	if e.Backend == "kumo" {
		var r struct{ SentEmails []struct{ Body string } }
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		for _, m := range r.SentEmails {
			bodies = append(bodies, m.Body)
		}
	} else {
		var r struct {
			SES struct {
				Message []struct {
					Body string `json:"body"`
				}
			} `json:"ses"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		for _, m := range r.SES.Message {
			bodies = append(bodies, m.Body)
		}
	}
	n := 0
	for _, body := range bodies {
		if strings.Contains(body, needle) {
			n++
		}
	}
	return n
}

// A notification whose SES reply is lost after SES sent it is an uncertain
// effect: SES has no readback, so it is parked unknown_outcome for a
// person — one email, and the message coming back never sends another.
func TestNotificationWithALostSESReplyIsSentOnceAndParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *worker.Handler) { h.Notify = notifyConfig(t) }))
		ctx := context.Background()
		lose := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation == "SendEmail" {
				return faultinject.LostReply
			}
			return ""
		}))
		ses := sesv2.NewFromConfig(e.AWS, func(o *sesv2.Options) { o.APIOptions = append(o.APIOptions, lose.Register) })
		// moto refuses an unverified sender, as SES does (an identity
		// another test created is fine).
		_, _ = sesv2.NewFromConfig(e.AWS).CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String("tasks.example.com")})
		mail, err := email.New(email.Options{From: "noreply@tasks.example.com", AllowedRecipients: []string{"@example.com"}, Client: ses})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := deliver.NewRegistry(mail)
		if err != nil {
			t.Fatal(err)
		}
		b.h.Destinations = reg

		task := b.create(t, "notify-lost-ses", prompt, requester)
		b.send(t, task.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		kids := b.children(t, task.TaskID)
		if len(kids) != 1 {
			t.Fatalf("%d notifications, want 1", len(kids))
		}
		n := kids[0]
		b.send(t, n.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if lose.Total(faultinject.LostReply) != 1 {
			t.Fatalf("faults injected: %+v", lose.Injected())
		}
		if st := b.get(t, n.TaskID).State; st != ledger.StateUnknown && st != ledger.StateNeedsReview {
			t.Fatalf("notification after a lost SES reply: %s, want unknown or parked", st)
		}
		// The reconciler decides once the call can no longer be running.
		for i := 0; i < 3 && b.get(t, n.TaskID).State != ledger.StateNeedsReview; i++ {
			b.clock.Advance(10 * time.Minute)
			b.reconcileDeliveries(t, reg)
		}
		got := b.get(t, n.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("notification after a lost SES reply: %s (%s), want needs_review unknown_outcome", got.State, got.ReviewReason)
		}
		// The message comes back: nothing is sent again.
		b.send(t, n.TaskID)
		handle(t, b.h, ctx, b.deliver(t, 1, 60))
		if k := sentEmails(t, e, "operation "+n.TaskID); k != 1 {
			t.Fatalf("SES sent %d emails for the notification, want 1", k)
		}
		if lose.Total(faultinject.LostReply) != 1 {
			t.Fatalf("SendEmail was called again: %+v", lose.Injected())
		}
	})
}
