package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestExpiredLastLeaseOfSideEffectFreeKindDoesNotClaimDeduplication: the
// expired-lease rule's default branch is reached whenever the step has no
// side effects (Handler.SideEffects says so for its kind) and the provider
// offers no readback — not only when the provider deduplicates. So its
// review must not tell the operator that "the provider deduplicates by the
// operation id" and a retry "cannot generate twice"
// (review.BudgetExhaustedDeduplicated) for a provider that ignores
// idempotency keys: the worker wrote a call-start mark (the provider
// neither deduplicates nor reads back), so the provider may well have
// generated, and a retry generates again.
func TestExpiredLastLeaseOfSideEffectFreeKindDoesNotClaimDeduplication(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		task := create(t, b, "side-effect-free-last", func(n *ledger.NewTask) { n.MaxAttempts = 1 })
		c := claim(t, b, task.TaskID)
		markCall(t, b, c) // the worker started the call: it may have generated
		b.clock.Advance(time.Minute)
		h := b.handler()
		h.SideEffects = func(string) bool { return false } // a step that cannot cause an external side effect
		s := handle(t, h)
		b.clock.Advance(time.Minute) // past Settle: the unknown outcome is resolved
		s2 := handle(t, h)
		if s.Parked+s2.Parked != 1 {
			t.Fatalf("summaries = %+v, %+v, want the expired last lease parked", s, s2)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		text := r.Summary + "\n" + strings.Join(r.Known, "\n") + "\n" + strings.Join(r.Uncertain, "\n") + "\n" + strings.Join(r.SafeActions, "\n")
		if strings.Contains(text, "deduplicates") || strings.Contains(text, "cannot generate twice") {
			t.Fatalf("review of a provider that ignores idempotency keys claims it deduplicates:\n%s", text)
		}
	})
}
