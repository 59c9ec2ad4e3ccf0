package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// lapsedTries bounds the attempts to save a lapsed result (the first try
// plus retries after a throttle or another AWS error).
const lapsedTries = 3

// lapsedBackoff is the base of the full-jitter backoff between those tries.
const lapsedBackoff = 200 * time.Millisecond

// lapsed handles a Complete refused (fe) because the reconciler had already
// parked the task unknown_outcome at this very assignment version: the
// worker was slow, not gone (its lease expired, the task went to unknown
// and, with no readback, was parked). The result it holds settles the
// uncertainty, so it is saved with ledger.CompleteLapsed, which also
// resolves the open review item as completed by this worker; discarding it
// would leave the operator a "retry" that makes the provider act twice.
// ok is false for any other refusal: the caller discards the result.
func (h *Handler) lapsed(ctx context.Context, t *ledger.Task, c ledger.Completion, fe *ledger.FencedError, log *slog.Logger) (result, bool) {
	cur := fe.Current
	if cur == nil || cur.State != ledger.StateNeedsReview || cur.AssignmentVersion != t.AssignmentVersion ||
		cur.ReviewReason != ledger.ReviewUnknownOutcome {
		return result{}, false
	}
	x := review.Result{Provider: c.Provider, ProviderRef: c.ProviderRef, ResultBytes: len(c.Result)}
	var err error
	for try := 0; try < lapsedTries; try++ {
		if try > 0 && !lapsedSleep(ctx, rand.N(lapsedBackoff<<try)) {
			break
		}
		res := review.LapsedResult(t, x, h.Ledger.Now(), t.LeaseOwner)
		if _, err = h.Ledger.CompleteLapsed(ctx, t.TaskID, t.AssignmentVersion, c, res); err == nil {
			log.InfoContext(ctx, "completed after the park: the lapsed result was saved and its unknown_outcome review resolved",
				"provider", c.Provider, "provider_ref", c.ProviderRef, "result_bytes", len(c.Result))
			return ack(OutcomeCompleted), true
		}
		var fe2 *ledger.FencedError
		if errors.As(err, &fe2) {
			if fe2.Current != nil && fe2.Current.State == ledger.StateCompleted && fe2.Current.AssignmentVersion == t.AssignmentVersion &&
				fe2.Current.Result == c.Result {
				// An earlier try applied after all (its reply was lost).
				log.InfoContext(ctx, "completed after the park (an earlier save applied)", "result_bytes", len(c.Result))
				return ack(OutcomeCompleted), true
			}
			log.WarnContext(ctx, "lapsed result rejected; result discarded", "why", fe2.Why, "current_version", currentVersion(fe2))
			return ack(OutcomeFenced), true
		}
		var tl *ledger.ItemTooLargeError
		if errors.As(err, &tl) || ledger.IsValidation(err) {
			break // repeating it cannot help
		}
	}
	log.ErrorContext(ctx, "saving the lapsed result failed; the task stays parked unknown_outcome", "error", err.Error())
	return deferred, true
}

// lapsedSleep waits d or until ctx is done; it reports whether d elapsed.
func lapsedSleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
