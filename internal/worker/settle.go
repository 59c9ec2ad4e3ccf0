package worker

import (
	"github.com/taskledger/taskledger/pkg/ledger"
)

// knowledge is what the worker knows of its attempt when a write that
// settles it is refused.
type knowledge int

const (
	knowResult       knowledge = iota // the provider's reply, which the task item can hold
	knowUnsaved                       // the provider's reply, which cannot be saved (too large, refused as invalid, its save kept failing)
	knowRefusedInput                  // a refusal in so many words (retrypolicy.Refused) of the input: the task fails
	knowRefusedRetry                  // a refusal in so many words, transient, with budget left: a retry
	knowRefusedPark                   // a refusal in so many words that parks (configuration, no budget left)
	knowMayHaveActed                  // sent, and the provider may have acted (a 5xx, a timeout, an unclassified error)
	knowNoCall                        // no provider call was started under the assignment
	knowCharged                       // sent, it may have acted, and repeating it costs only money (a retry-safe generation)
	knowKinds
)

// refusal is k when the provider refused the call in so many words
// (retrypolicy.Refused), else knowCharged for a retry-safe call (what it
// did costs only money) and knowMayHaveActed for an effect.
func refusal(refused, retrySafe bool, k knowledge) knowledge {
	switch {
	case refused:
		return k
	case retrySafe:
		return knowCharged
	}
	return knowMayHaveActed
}

// decision is the ledger transition settle sends.
type decision int

const (
	sendNothing            decision = iota // acknowledge: another assignment's task, settled, or the reconciler's rule decides
	sendParkUnknown                        // ledger.Park from unknown at mine
	sendReleaseUnknown                     // ledger.ReleaseUnknown at mine
	sendCompleteLapsed                     // ledger.CompleteLapsed at mine
	sendFailLapsed                         // ledger.FailLapsed at mine
	sendRetryLapsed                        // ledger.RetryLapsed at mine
	sendReviseLapsed                       // ledger.ReviseLapsed at mine
	sendReleaseLapsed                      // ledger.ReleaseLapsed at mine
	sendReleaseRequeued                    // ledger.ReleaseRequeued at mine
	sendCompleteCancelled                  // ledger.CompleteCancelled: unknown at mine+1, cancel_version mine
	sendCancelUnknown                      // ledger.CancelUnknown at mine+1
	sendCompleteCancelPark                 // ledger.CompleteLapsed at mine+1, the cancel's park
	sendCancelLapsed                       // ledger.CancelLapsed at mine+1
)

// givesBack reports whether d gives the assignment and its attempt back.
func (d decision) givesBack() bool {
	return d == sendReleaseUnknown || d == sendReleaseLapsed || d == sendReleaseRequeued
}

// settle decides what a worker whose settling write of assignment mine was
// refused sends next, from read — the task as the refusal returned it — and
// k. Pure: it reads nothing else.
func settle(read *ledger.Task, mine int64, k knowledge) decision {
	p := where(read, mine)
	switch {
	case k == knowResult && p == atCancel && read.ApprovalTTL() > 0:
		// Opening the gate after the caller's cancel would let an approval
		// start deliveries nobody wants: cancelled, without the result.
		return sendCancelUnknown
	case k == knowResult && p == atCancelPark && read.ApprovalTTL() > 0,
		// Mine made no call, but an earlier attempt's may have acted (a
		// deduplicating provider's is re-queued unread): the reconciler reads back.
		k == knowNoCall && (p == atCancel || p == atCancelPark) && read.Attempts > 1:
		return sendNothing
	}
	return settleRows[p][k]
}

// settleRows is settle's table (doc.go, "Settling after the lease is
// lost"): the transition from each place for each knowledge; a cell left
// out sends nothing.
var settleRows = [...][knowKinds]decision{
	atUnknown: {
		knowUnsaved: sendParkUnknown, knowRefusedPark: sendParkUnknown, knowNoCall: sendReleaseUnknown,
	},
	atRequeued: {knowNoCall: sendReleaseRequeued},
	atPark: {
		knowResult: sendCompleteLapsed, knowUnsaved: sendReviseLapsed, knowRefusedInput: sendFailLapsed,
		knowRefusedRetry: sendRetryLapsed, knowRefusedPark: sendReviseLapsed, knowNoCall: sendReleaseLapsed,
	},
	atCancel: {
		knowResult: sendCompleteCancelled, knowRefusedInput: sendCancelUnknown, knowRefusedRetry: sendCancelUnknown,
		knowRefusedPark: sendCancelUnknown, knowNoCall: sendCancelUnknown, knowCharged: sendCancelUnknown,
	},
	atCancelPark: {
		knowResult: sendCompleteCancelPark, knowRefusedInput: sendCancelLapsed, knowRefusedRetry: sendCancelLapsed,
		knowRefusedPark: sendCancelLapsed, knowNoCall: sendCancelLapsed, knowCharged: sendCancelLapsed,
	},
}

// place is where a refused write found the task, seen from the assignment
// that sent it.
type place int

const (
	atNothing    place = iota // another assignment's, settled, or gone: nothing of mine to settle
	atUnknown                 // unknown at mine: the reconciler expired the lease of a slow worker
	atPark                    // then parked unknown_outcome at mine, for want of a readback
	atCancel                  // unknown at mine+1 by a cancel while running of mine, nothing decided since (ledger.CancelledAt)
	atCancelPark              // that cancel parked unknown_outcome at mine+1 by the reconciler
	atRequeued                // queued at mine, the attempt still counted: the reconciler re-queued the lapsed lease (ledger.RequeuedAt)
)

// where places read (nil: gone) from assignment mine, by the ledger's own
// predicates where it has them (derived from its transitions' guards).
func where(read *ledger.Task, mine int64) place {
	switch {
	case read == nil:
		return atNothing
	case read.AssignmentVersion == mine && read.State == ledger.StateUnknown:
		return atUnknown
	case ledger.ParkedAt(read, mine):
		return atPark
	case ledger.RequeuedAt(read, mine):
		return atRequeued
	case ledger.CancelledAt(&ledger.FencedError{Current: read}, mine):
		return atCancel
	case ledger.ParkedAt(read, mine+1) && read.CancelVersion == mine && !read.HasResult():
		return atCancelPark
	}
	return atNothing
}

// stillOurs reports whether a refused renewal left the assignment with the
// worker (unknown at mine, or its park): the call may go on, and Complete
// or CompleteLapsed can still save its result.
func stillOurs(read *ledger.Task, mine int64) bool {
	p := where(read, mine)
	return p == atUnknown || p == atPark
}
