package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// notificationsOf are the notification tasks whose parent is id.
func notificationsOf(t *testing.T, b *bundle, id string) []ledger.Task {
	t.Helper()
	var ns []ledger.Task
	for _, k := range b.env.Children(t, id) {
		if k.Provenance != nil && k.Provenance.Type == ledger.ProvenanceNotification {
			ns = append(ns, k)
		}
	}
	return ns
}

// A withdrawal returns the task to its approvers, who are told a decision
// is needed again, in the withdrawal's own transaction: once per round it
// opens (a repeated withdrawal tells nobody twice).
func TestWithdrawalTellsTheApproversADecisionIsNeededAgain(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		notify, err := followup.Parse(`{"page_origin":"https://tasks.example.com","approvers":{"email":["approver@example.com"]}}`)
		if err != nil {
			t.Fatal(err)
		}
		b := setup(t, e, withHandler(func(h *api.Handler) { h.Notify = notify }))
		id := view(t, b.do(t, submitReq("wf-notify", planBody))).TaskID
		generateAs(t, b, id)
		sha := ledger.SHA256Hex(generated)
		for round := 1; round <= 2; round++ {
			wantStatus(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+sha+`"}`)), http.StatusOK)
			for range 2 { // the second: a repeated withdrawal, answered unchanged
				if w := view(t, b.do(t, decisionReq("withdraw", id, `{"note":"wrong customer"}`))); w.Approval.Round != round {
					t.Fatalf("withdrawal %d left round %d", round, w.Approval.Round)
				}
			}
			ns := notificationsOf(t, b, id)
			if len(ns) != round {
				t.Fatalf("after withdrawal %d: %d notifications, want %d", round, len(ns), round)
			}
			want := followup.Key(id, followup.EventApprovalWithdrawn, int64(round), followup.EmailDestination)
			found := false
			for _, n := range ns {
				if n.IdempotencyKey == want {
					found = n.State == ledger.StateQueued && n.Provenance.Event == followup.EventApprovalWithdrawn &&
						strings.Contains(n.Input, `"to":["approver@example.com"]`) && strings.Contains(n.Input, "needs a decision again")
				}
			}
			if !found {
				t.Fatalf("no queued approvers' notification keyed %s among %+v", want, ns)
			}
		}
	})
}
