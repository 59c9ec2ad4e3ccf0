package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestRegenerateKeyReusedAfterRetentionHasItsOwnReservationID: the API
// side of the worker's
// TestRegenerateKeyReusedAfterRetentionDoesNotTakeTheChainReservation. A
// regenerate C1 (key k1) of a budgeted root holds a reservation on the
// chain record. C1 ends (cancelled here) and its retention passes; the
// same caller's regenerate of the still-live root under k1 is accepted
// (202) as a NEW task with the SAME id and the SAME chain record (a chain
// is named by its root, not the task). Its attempt 1's reservation id must
// not be C1's, or Reserve would take it as already made — no room checked,
// 40 of 150 tokens left, 110 asked. The worker's reservation ids start
// with the task's own budget name (ledger.Task.OwnBudget: its id and
// creation), as this test reserves, so the new task's Reserve is refused.
func TestRegenerateKeyReusedAfterRetentionHasItsOwnReservationID(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e, withSpend(e, clock, nil))
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("regen-reuse-root", budgetBody("p", `{"max_total_tokens":150}`))))
		c1 := view(t, b.do(t, regenReq(root.TaskID, "regen-reuse-k1", "")))
		old := stored(t, b, c1.TaskID)
		chain := spend.ChainKeyOf(old)
		bud := spend.Budget{MaxTokens: 150}
		if _, err := b.h.Budgets.Reserve(ctx, chain, bud, spend.Reservation{ID: old.OwnBudget() + ".a1", Tokens: 110}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, b.do(t, cancelReq(c1.TaskID)), http.StatusOK)

		clock.Advance(ledger.DefaultRetention + 24*time.Hour)
		resp := b.do(t, regenReq(root.TaskID, "regen-reuse-k1", ""))
		wantStatus(t, resp, http.StatusAccepted)
		fresh := stored(t, b, view(t, resp).TaskID)
		if fresh.TaskID != old.TaskID || fresh.CreatedMs == old.CreatedMs {
			t.Fatalf("setup: fresh %s created %d, old %s created %d", fresh.TaskID, fresh.CreatedMs, old.TaskID, old.CreatedMs)
		}
		_, err := b.h.Budgets.Reserve(ctx, spend.ChainKeyOf(fresh), bud, spend.Reservation{ID: fresh.OwnBudget() + ".a1", Tokens: 110})
		var be *spend.BudgetExhaustedError
		if !errors.As(err, &be) {
			s, _ := b.h.Budgets.Get(ctx, spend.ChainKeyOf(fresh))
			t.Fatalf("the new task %s (created %d; its predecessor under the id %d) reserves on chain record %s (its predecessor's: %v) with reservation id %s.a1: Reserve of 110 with %d of 150 used answered %v, want budget exhausted",
				fresh.TaskID, fresh.CreatedMs, old.CreatedMs, spend.ChainKeyOf(fresh), spend.ChainKeyOf(fresh) == chain, fresh.OwnBudget(), s.ReservedTokens+s.Spent.Tokens(), err)
		}
	})
}
