package spend_test

import (
	"context"
	"errors"
	"testing"

	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestReserveOfAHeldIDWithOtherAmountsResizesIt: the worker names a
// reservation by its attempt (AttemptReservationID) and computes its
// amount from the call (input bound, price table, model). An attempt
// number is reused when a claim is given back, so a reservation still
// held by a crashed attempt can meet a Reserve of the same id computed by
// a worker deployed with another price table or bound. The Reserve resizes
// the hold to the new amount when the difference fits the budget — so the
// call's Settle records it and the budget counts it — and is refused
// otherwise, the old hold kept.
func TestReserveOfAHeldIDWithOtherAmountsResizesIt(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil)
		budget := spend.Budget{MaxTokens: 1000}
		const key = "chain.t_sameid"
		// The crashed attempt's hold (old price table / bound).
		if _, err := b.acct.Reserve(ctx, key, budget, spend.Reservation{ID: "t_sameid.a1", Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		// The same attempt id, claimed again by a worker whose bound for
		// the call is 900 tokens.
		r := spend.Reservation{ID: "t_sameid.a1", Tokens: 900}
		st, err := b.acct.Reserve(ctx, key, budget, r)
		if err != nil || st.ReservedTokens != 900 {
			t.Fatalf("Reserve of the held id with 900 tokens = %+v, %v; want the hold resized to 900", st, err)
		}
		if _, err := b.acct.Settle(ctx, key, r, spend.Usage{InputTokens: 400, OutputTokens: 500}); err != nil {
			t.Fatalf("settle of the resized reservation: %v", err)
		}
		if st, err = b.acct.Get(ctx, key); err != nil || st.Spent.Tokens() != 900 || st.ReservedTokens != 0 {
			t.Fatalf("after the 900-token call: %+v, %v; want 900 spent, nothing reserved", st, err)
		}
		var be *spend.BudgetExhaustedError
		if _, err := b.acct.Reserve(ctx, key, budget, spend.Reservation{ID: "t_sameid.a2", Tokens: 800}); !errors.As(err, &be) {
			t.Fatalf("an 800-token reservation after a 900-token call on a 1000-token budget = %v; want *BudgetExhaustedError", err)
		}

		// A resize that does not fit is refused and keeps the old hold.
		const other = "chain.t_nofit"
		for _, h := range []spend.Reservation{{ID: "t_nofit.a1", Tokens: 100}, {ID: "t_nofit.a2", Tokens: 800}} {
			if _, err := b.acct.Reserve(ctx, other, budget, h); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.acct.Reserve(ctx, other, budget, spend.Reservation{ID: "t_nofit.a1", Tokens: 300}); !errors.As(err, &be) {
			t.Fatalf("resize of a 100-token hold to 300 with 100 tokens of room = %v; want *BudgetExhaustedError", err)
		}
		if st, err = b.acct.Get(ctx, other); err != nil || st.ReservedTokens != 900 {
			t.Fatalf("after the refused resize: %+v, %v; want the 900 tokens held before", st, err)
		}
	})
}
