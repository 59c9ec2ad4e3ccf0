package ledger_test

import (
	"context"
	"testing"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Every deliver task an approval creates records that approval as its
// provenance — the gated task, the approved artifact (the edit's hash when
// edited), the decider and the round — whatever provenance the request
// carried: a caller cannot make an approval's deliveries look direct, nor
// name another decider or round. A re-approval after a withdrawal says
// round 1.
func TestApprovalRecordsItsProvenanceOnEveryDelivery(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := awaiting(t, b, "provenance")
		edited := `{"text":"edited before approval"}`
		r := approveReq(task, task.ResultSHA256, edited, 2)
		for i := range r.Deliveries {
			// What a confused or hostile caller of Approve might pass.
			r.Deliveries[i].Provenance = &ledger.Provenance{Type: ledger.ProvenanceDirect, Caller: "jwt:mallory", Round: 7}
		}
		got, _, err := b.l.Approve(ctx, task, r)
		if err != nil {
			t.Fatal(err)
		}
		want := ledger.Provenance{Type: ledger.ProvenanceApproval, TaskID: task.TaskID, ArtifactSHA256: ledger.SHA256Hex(edited), DecidedBy: "jwt:bob", Round: 0}
		for _, id := range got.DeliveryIDs {
			d, err := b.l.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if d.Provenance == nil || *d.Provenance != want {
				t.Fatalf("delivery %s provenance = %+v, want %+v", id, d.Provenance, want)
			}
		}
		back, err := b.l.Withdraw(ctx, task.TaskID, "jwt:bob", "again", "")
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := b.l.Approve(ctx, back, approveReq(back, back.ResultSHA256, "", 1))
		if err != nil {
			t.Fatal(err)
		}
		d, err := b.l.Get(ctx, again.DeliveryIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		want = ledger.Provenance{Type: ledger.ProvenanceApproval, TaskID: task.TaskID, ArtifactSHA256: back.ResultSHA256, DecidedBy: "jwt:bob", Round: 1}
		if d.Provenance == nil || *d.Provenance != want {
			t.Fatalf("re-approved delivery provenance = %+v, want %+v", d.Provenance, want)
		}
	})
}
