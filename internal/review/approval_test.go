package review_test

import (
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestApprovalExpired(t *testing.T) {
	task := &ledger.Task{TaskID: "t_x", Result: `{"text":"secret summary"}`}
	task.ResultSHA256 = ledger.SHA256Hex(task.Result)
	task.ApprovalDeadlineMs = 1796090626220
	task.WithdrawnDeliveryIDs = []string{"t_a", "t_b"}
	r := review.ApprovalExpired(task)
	all := r.Summary + strings.Join(r.Known, "|") + strings.Join(r.SafeActions, "|")
	if r.Reason != ledger.ReviewApprovalExpired || len(r.Uncertain) != 0 || len(r.SafeActions) != 2 {
		t.Fatalf("review = %+v", r)
	}
	for _, want := range []string{"t_x", task.ResultSHA256, "2026-", "nothing was delivered", "2 deliveries", "review resolve t_x", "review retry t_x"} {
		if !strings.Contains(all, want) {
			t.Errorf("review does not say %q: %s", want, all)
		}
	}
	if strings.Contains(all, "secret summary") {
		t.Error("the review quotes the result text")
	}
}
