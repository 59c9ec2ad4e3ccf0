package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestOffloadedGatedResultCanBeSeenAndApproved: a gated task whose ~9 KB
// result was placed in S3 (over the 4 KiB inline limit, under the 32 KiB
// deliver payload limit) lands in awaiting_approval with result_ref. The
// approver must be shown the result — the view resolves an offloaded
// result in awaiting_approval too, not only for completed tasks, or the
// approver would see result_sha256 and no result and approve blind — and
// approving that hash must create the deliveries with the offloaded bytes,
// not splice the empty inline result into the deliver input (422
// artifact-not-deliverable).
func TestOffloadedGatedResultCanBeSeenAndApproved(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withPayloads(st))
		ctx := context.Background()
		resp := b.do(t, submitReq("offload-gated", planBody))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		c, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		result, _ := json.Marshal(map[string]string{"text": strings.Repeat("word ", 1800)})
		v, err := st.PlaceResult(ctx, id, c.CreatedMs, c.AssignmentVersion, result)
		if err != nil || v.Ref == nil {
			t.Fatalf("place result: %+v %v", v, err)
		}
		ref := ledger.PayloadRef(*v.Ref)
		got, err := b.l.Complete(ctx, id, c.AssignmentVersion, ledger.Completion{ResultRef: &ref, ApprovalTTL: c.ApprovalTTL()})
		if err != nil || got.State != ledger.StateAwaitingApproval {
			t.Fatalf("complete = %v, %v; want awaiting_approval", got, err)
		}

		resp = b.do(t, getReq(id))
		wantStatus(t, resp, http.StatusOK)
		if tv := view(t, resp); string(tv.Result) != string(result) {
			t.Errorf("awaiting_approval view shows a %d-byte result, want the %d-byte artifact the approver is asked to approve", len(tv.Result), len(result))
		}

		resp = b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+ref.SHA256+`"}`))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("approve of the offloaded artifact = %d %s; want 200 with its deliveries", resp.StatusCode, resp.Body)
		}
	})
}
