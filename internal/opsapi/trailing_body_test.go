package opsapi_test

import (
	"testing"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A body that is one JSON object followed by more (a stray closing
// bracket or brace) is not "one JSON object": it is refused as
// malformed-json and the parked task stays parked.
func TestActionBodyWithTrailingDataIsRefusedAndChangesNothing(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		for _, tail := range []string{"]", "}", "}}", "]{"} {
			p := parked(t, b, "trailing"+tail)
			c, h, m := do(t, b, "POST", "/reviews/"+p.TaskID+"/resolve", `{"outcome":"failed","note":"n","by":"ops"}`+tail)
			wantProblem(t, c, h, m, 400, "malformed-json")
			got, err := b.l.Get(ctx, p.TaskID)
			if err != nil || got.State != ledger.StateNeedsReview {
				t.Fatalf("body with trailing %q: task %+v (%v), want it still needs_review", tail, got, err)
			}
		}
	})
}
