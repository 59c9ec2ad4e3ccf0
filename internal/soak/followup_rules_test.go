package soak

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/internal/destination/lambda/example"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// fuBundle is a soak with the follow-up destinations' state and no
// backend: the rules are checked on tables built by hand.
type fuBundle struct {
	s      *soak
	stored map[string]*ledger.Task
}

func fuSetup(t *testing.T) *fuBundle {
	t.Helper()
	s := &soak{cfg: Config{Seed: 1}, byID: map[string]*task{}, injected: map[Kind]int{}, fired: map[string]bool{},
		saves: map[string]int{}, maybeSav: map[string]int{}}
	s.fu = fuState{store: example.NewMemory(), invokes: map[string][]invokeEvent{}, sends: map[string]int{}, parent: map[string]string{}, lost: map[string]bool{}, maybeSent: map[string]int{}}
	s.fu.fn = &example.Handler{Store: s.fu.store}
	return &fuBundle{s: s, stored: map[string]*ledger.Task{}}
}

// parent adds a completed task of kind k with a JSON-object result.
func (b *fuBundle) parent(id string, k Kind, state ledger.State) *ledger.Task {
	b.s.byID[id] = &task{id: id, kind: k}
	b.s.tasks = append(b.s.tasks, b.s.byID[id])
	st := &ledger.Task{TaskID: id, State: state, Kind: "generate", AssignmentVersion: 2, Scope: Scope}
	if state == ledger.StateCompleted {
		st.Result = `{"text":"result of ` + id + `"}`
		st.ResultSHA256 = ledger.SHA256Hex(st.Result)
	}
	b.stored[id] = st
	return st
}

// delivery adds the plan delivery of p, in state.
func (b *fuBundle) delivery(p *ledger.Task, state ledger.State) *ledger.Task {
	input := `{"destination":"lambda","params":{"function":"example"},"payload":` + p.Result + `}`
	key := ledger.DeliveryKey(p.TaskID, p.ResultSHA256, 0, 0)
	d := &ledger.Task{TaskID: ledger.TaskID(p.Scope, key), IdempotencyKey: key, Scope: p.Scope, Kind: ledger.KindDeliver, State: state, Input: input, ParentTaskID: p.TaskID,
		Provenance: &ledger.Provenance{Type: ledger.ProvenancePlan, TaskID: p.TaskID, ArtifactSHA256: p.ResultSHA256}}
	p.DeliveryIDs = append(p.DeliveryIDs, d.TaskID)
	b.stored[d.TaskID] = d
	return d
}

// invoke runs the example function through the soak's Invoke API.
func (b *fuBundle) invoke(t *testing.T, d *ledger.Task, action string) *awslambda.InvokeOutput {
	t.Helper()
	in, _ := destination.ParseDeliverInput(json.RawMessage(d.Input))
	ev := lambda.Event{Action: action, OperationID: d.TaskID}
	if action == lambda.ActionDeliver {
		sum := destination.HashPayload(in.Payload)
		ev.Payload, ev.PayloadSHA256, ev.Provenance = in.Payload, sum, &destination.Provenance{Type: "plan", TaskID: d.ParentTaskID, ArtifactSHA256: sum}
	}
	raw, _ := json.Marshal(ev)
	out, _ := soakLambda{s: b.s}.Invoke(context.Background(), &awslambda.InvokeInput{FunctionName: aws.String("f"), Payload: raw})
	return out
}

// complete sets d completed with the receipt of the function's record.
func (b *fuBundle) complete(d *ledger.Task, readback bool) {
	rec, _, _ := b.s.fu.store.Get(context.Background(), d.TaskID)
	in, _ := destination.ParseDeliverInput(json.RawMessage(d.Input))
	rc := destination.Receipt{OperationID: d.TaskID, PayloadSHA256: destination.HashPayload(in.Payload), Destination: "lambda", ProviderRef: rec.Receipt}
	if readback {
		rc.ReadbackResult = destination.ReadbackFound
		d.ReadbackAt = "2026-01-01T00:00:00Z"
	}
	out, _ := json.Marshal(rc)
	d.State, d.Result, d.ProviderRef = ledger.StateCompleted, string(out), rec.Receipt
}

// notification adds p's notification of event n through email, in state.
func (b *fuBundle) notification(p *ledger.Task, event string, n int64, state ledger.State) *ledger.Task {
	key := followup.Key(p.TaskID, event, n, followup.EmailDestination)
	d := &ledger.Task{TaskID: ledger.TaskID(p.Scope, key), IdempotencyKey: key, Scope: p.Scope, Kind: ledger.KindDeliver, State: state, ParentTaskID: p.TaskID,
		Input:      `{"destination":"email","params":{"to":["r@soak.example.com"]},"payload":{"text":"x"}}`,
		Provenance: &ledger.Provenance{Type: ledger.ProvenanceNotification, TaskID: p.TaskID, Event: event}}
	b.stored[d.TaskID] = d
	return d
}

func (b *fuBundle) rules(emu map[string]int) []string {
	c := &checker{s: b.s, rows: map[Kind]*Row{}}
	c.followUps(b.stored, map[string]*ledger.Review{}, emu)
	var out []string
	for _, v := range c.violations {
		out = append(out, v.Rule)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A plan delivery to the example function passes when it acted once and
// completed with the function's receipt; a second deliver invoke after a
// lost reply without a lookup between, a missing delivery, and a
// completion whose receipt is not the record's are each caught.
func TestPlanDeliveryRules(t *testing.T) {
	t.Parallel()
	t.Run("clean", func(t *testing.T) {
		b := fuSetup(t)
		p := b.parent("t_ok", PlanLambda, ledger.StateCompleted)
		d := b.delivery(p, ledger.StateRunning)
		b.invoke(t, d, lambda.ActionDeliver)
		b.complete(d, false)
		if got := b.rules(nil); len(got) != 0 {
			t.Fatalf("a clean plan delivery: %v", got)
		}
	})
	t.Run("lost reply read back", func(t *testing.T) {
		b := fuSetup(t)
		p := b.parent("t_lost", PlanLambdaLoseReply, ledger.StateCompleted)
		d := b.delivery(p, ledger.StateRunning)
		if out := b.invoke(t, d, lambda.ActionDeliver); out != nil {
			t.Fatalf("the first deliver of a lose_reply delivery answered %s; want its reply lost", out.Payload)
		}
		b.invoke(t, d, lambda.ActionLookup)
		b.complete(d, true)
		if got := b.rules(nil); len(got) != 0 {
			t.Fatalf("a lost reply read back: %v", got)
		}
	})
	t.Run("re-invoked blind", func(t *testing.T) {
		b := fuSetup(t)
		p := b.parent("t_blind", PlanLambdaLoseReply, ledger.StateCompleted)
		d := b.delivery(p, ledger.StateRunning)
		b.invoke(t, d, lambda.ActionDeliver)
		b.invoke(t, d, lambda.ActionDeliver)
		b.complete(d, false)
		if got := b.rules(nil); !slices.Contains(got, "delivery_reinvoked_blind") || !slices.Contains(got, "lost_reply_not_read_back") {
			t.Fatalf("a second deliver after a lost reply: %v", got)
		}
	})
	t.Run("missing and foreign receipt", func(t *testing.T) {
		b := fuSetup(t)
		b.parent("t_none", PlanLambda, ledger.StateCompleted)
		p := b.parent("t_other", PlanLambda, ledger.StateCompleted)
		d := b.delivery(p, ledger.StateRunning)
		b.invoke(t, d, lambda.ActionDeliver)
		b.complete(d, false)
		d.Result = `{"operation_id":"` + d.TaskID + `","provider_ref":"ex_forged"}`
		got := b.rules(nil)
		if !slices.Contains(got, "plan_delivery_count") || !slices.Contains(got, "receipt_not_the_functions") {
			t.Fatalf("no delivery, and a forged receipt: %v", got)
		}
	})
}

// Notifications pass when each event of the task has exactly one, sent
// once; a second notification of one event, a second send, a lost reply
// completed without being parked, a notification of an event that did not
// happen and an emulator count that differs are each caught.
func TestNotificationRules(t *testing.T) {
	t.Parallel()
	sent := func(b *fuBundle, n *ledger.Task, times int) {
		b.s.fu.sends[n.TaskID] += times
		b.s.fu.parent[n.TaskID] = n.ParentTaskID
	}
	t.Run("clean", func(t *testing.T) {
		b := fuSetup(t)
		p := b.parent("t_done", NotifyCompleted, ledger.StateCompleted)
		n := b.notification(p, followup.EventCompleted, p.AssignmentVersion, ledger.StateCompleted)
		sent(b, n, 1)
		q := b.parent("t_parked", NotifyParked, ledger.StateNeedsReview)
		m := b.notification(q, followup.EventParked, 1, ledger.StateCompleted)
		sent(b, m, 1)
		l := b.parent("t_lost", NotifyLoseReply, ledger.StateCompleted)
		k := b.notification(l, followup.EventCompleted, l.AssignmentVersion, ledger.StateNeedsReview)
		k.ReviewReason = ledger.ReviewUnknownOutcome
		sent(b, k, 1)
		b.s.fu.lost[k.TaskID] = true
		if got := b.rules(map[string]int{n.TaskID: 1, m.TaskID: 1, k.TaskID: 1}); len(got) != 0 {
			t.Fatalf("clean notifications: %v", got)
		}
	})
	// A SendEmail that failed after its request may have left (a timeout,
	// a reset) is a send nobody can place: the park saying so is genuine,
	// and so is one after the delivery's call-start mark with no send.
	// Only a park with neither is false uncertainty.
	t.Run("unknowable sends", func(t *testing.T) {
		b := fuSetup(t)
		p := b.parent("t_timeout", NotifyCompleted, ledger.StateCompleted)
		n := b.notification(p, followup.EventCompleted, p.AssignmentVersion, ledger.StateNeedsReview)
		n.ReviewReason = ledger.ReviewUnknownOutcome
		b.s.fu.parent[n.TaskID] = n.ParentTaskID
		b.s.fu.maybeSent[n.TaskID] = 1
		q := b.parent("t_marked", NotifyCompleted, ledger.StateCompleted)
		m := b.notification(q, followup.EventCompleted, q.AssignmentVersion, ledger.StateNeedsReview)
		m.ReviewReason = ledger.ReviewUnknownOutcome
		m.AssignmentVersion, m.CallStartedVersion = 1, 1
		b.s.fu.parent[m.TaskID] = m.ParentTaskID
		if got := b.rules(map[string]int{}); len(got) != 0 {
			t.Fatalf("genuinely uncertain notifications reported: %v", got)
		}
		r := b.parent("t_nothing", NotifyCompleted, ledger.StateCompleted)
		k := b.notification(r, followup.EventCompleted, r.AssignmentVersion, ledger.StateNeedsReview)
		k.ReviewReason = ledger.ReviewUnknownOutcome
		if got := b.rules(map[string]int{}); !slices.Contains(got, "false_uncertainty") {
			t.Fatalf("a park with no send and no mark not reported: %v", got)
		}
	})
	t.Run("broken", func(t *testing.T) {
		b := fuSetup(t)
		p := b.parent("t_twice", NotifyCompleted, ledger.StateCompleted)
		n := b.notification(p, followup.EventCompleted, p.AssignmentVersion, ledger.StateCompleted)
		sent(b, n, 2)
		b.notification(p, followup.EventCompleted, p.AssignmentVersion+1, ledger.StateCompleted)
		b.notification(p, followup.EventParked, 1, ledger.StateQueued)
		l := b.parent("t_lost", NotifyLoseReply, ledger.StateCompleted)
		k := b.notification(l, followup.EventCompleted, l.AssignmentVersion, ledger.StateCompleted)
		sent(b, k, 1)
		b.s.fu.lost[k.TaskID] = true
		got := b.rules(map[string]int{n.TaskID: 1})
		for _, want := range []string{"duplicate_notification_send", "notification_count", "notification_of_event_not_happened", "follow_up_not_final", "lost_notification_not_parked", "emulator_sends_differ"} {
			if !slices.Contains(got, want) {
				t.Errorf("rule %s not reported; got %v", want, got)
			}
		}
	})
}
