package deliver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

const notifyIn = `{"destination":"notify","params":{"to":"a@example.com"},"payload":{"a":1}}`

// A delivery never reaches its destination without a provenance: a task
// bound without one (or with one that does not say where it came from) is
// refused before any call, and a bound task's provenance is what the
// destination records.
func TestDeliveryCarriesItsProvenance(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	reg, sims := registry(t, c, dsim.Options{})
	for name, p := range map[string]*destination.Provenance{
		"none":                  nil,
		"no type":               {Caller: "jwt:bob"},
		"direct without caller": {Type: destination.ProvenanceDirect},
		"approval without hash": {Type: destination.ProvenanceApproval, TaskID: "t_x", DecidedBy: "jwt:carol"},
	} {
		step := deliver.Bind(reg, deliver.Task{TaskID: "op-" + name, Input: notifyIn, Provenance: p})
		_, err := step.Generate(ctx, contract.Request{OperationID: "op-" + name})
		if retrypolicy.Classify(err).Class != retrypolicy.PermanentInput || !strings.Contains(err.Error(), "provenance") {
			t.Errorf("%s: Generate = %v, want a permanent refusal naming the provenance", name, err)
		}
		if n := sims[dsim.Notify].Calls("op-" + name); n != 0 {
			t.Errorf("%s: %d calls reached the destination", name, n)
		}
	}
	want := destination.Provenance{Type: destination.ProvenanceApproval, TaskID: "t_gated", ArtifactSHA256: strings.Repeat("ab", 32), DecidedBy: "jwt:carol", Round: 2}
	step := deliver.Bind(reg, deliver.Task{TaskID: "op-ok", Input: notifyIn, Provenance: &want})
	if _, err := step.Generate(ctx, contract.Request{OperationID: "op-ok"}); err != nil {
		t.Fatal(err)
	}
	got, ok := sims[dsim.Notify].First("op-ok")
	if !ok || got.Provenance == nil || *got.Provenance != want {
		t.Fatalf("the destination recorded provenance %+v, want %+v", got.Provenance, want)
	}
}

// ProvenanceOf reads the recorded provenance; a deliver task recorded
// before provenance was (queued across an upgrade) gets it from its
// reserved approval key and decider, or else is its caller's direct one.
func TestProvenanceOfATaskRecordedBeforeProvenance(t *testing.T) {
	sha := strings.Repeat("c", 64)
	for name, c := range map[string]struct {
		task ledger.Task
		want *destination.Provenance
	}{
		"recorded": {ledger.Task{Kind: deliver.Kind, Scope: "jwt:alice", Provenance: &ledger.Provenance{Type: ledger.ProvenanceDirect, Caller: "jwt:alice"}},
			&destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:alice"}},
		"legacy approval": {ledger.Task{Kind: deliver.Kind, Scope: "jwt:alice", ParentTaskID: "t_gated", Approval: ledger.Approval{DecidedBy: "jwt:carol"}, IdempotencyKey: ledger.DeliveryKey("t_gated", sha, 1, 0)},
			&destination.Provenance{Type: destination.ProvenanceApproval, TaskID: "t_gated", ArtifactSHA256: sha, DecidedBy: "jwt:carol", Round: 0}},
		"legacy approval, round 3": {ledger.Task{Kind: deliver.Kind, Scope: "jwt:alice", ParentTaskID: "t_gated", Approval: ledger.Approval{DecidedBy: "jwt:carol"}, IdempotencyKey: ledger.DeliveryKey("t_gated", sha, 0, 3)},
			&destination.Provenance{Type: destination.ProvenanceApproval, TaskID: "t_gated", ArtifactSHA256: sha, DecidedBy: "jwt:carol", Round: 3}},
		"legacy direct": {ledger.Task{Kind: deliver.Kind, Scope: "jwt:bob", IdempotencyKey: "order-4711"},
			&destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:bob"}},
		"generate": {ledger.Task{Kind: "generate", Scope: "jwt:bob"}, nil},
	} {
		got := deliver.ProvenanceOf(&c.task)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: ProvenanceOf = %+v, want %+v", name, got, c.want)
		}
		if got != nil {
			if err := got.Validate(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}
