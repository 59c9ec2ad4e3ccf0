package worker

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// The cells settle is checked over: the task as a refused write found it
// (its state; where its assignment version stands from the worker's, mine;
// a variant) × what the worker knows.
const settleMine = int64(7)

const parkedUO, parkedOther = "needs_review unknown_outcome", "needs_review budget_exhausted"

var settleStates = []string{
	"queued", "running", "retry_wait", "unknown", "completed", "failed", "cancelled",
	parkedUO, parkedOther, "awaiting_approval", "rejected",
}

// Where the read's assignment version stands.
const (
	atMine        = "mine"            // mine, no cancel
	pastMine      = "past mine"       // mine+1: another claim took the task
	cancelAtMine  = "cancel at mine"  // mine+1 by a cancel while running of mine
	cancelAtOther = "cancel at other" // mine+2 by a cancel of the assignment after mine
)

var settleVersions = []string{atMine, pastMine, cancelAtMine, cancelAtOther}

// Variants of the read.
const (
	plain   = "plain"
	gated   = "gated"   // the task needs an approval
	marked  = "marked"  // the call-start mark is at mine
	saved   = "saved"   // a result is on the item
	retried = "retried" // an earlier attempt: mine is the second
	// Not an attempt to give back: every give-back removes claimed_ms, an
	// operator's retry resets attempts.
	givenBack = "given back"
	reset     = "reset by an operator"
	// No outcome open, the error readback_absent: a readback that found
	// nothing settled every attempt's (ledger.Requeue from unknown).
	readBack = "read back absent"
)

var every = []string{plain, gated, marked, saved, retried, givenBack, reset, readBack}

var knowledgeNames = [knowKinds]string{
	knowResult: "result", knowUnsaved: "unsaved result", knowRefusedInput: "input refused",
	knowRefusedRetry: "retryable refusal", knowRefusedPark: "refusal that parks",
	knowMayHaveActed: "may have acted", knowNoCall: "no call", knowCharged: "charged (retry-safe)",
}

var decisionNames = map[decision]string{
	sendNothing: "nothing", sendParkUnknown: "Park from unknown", sendReleaseUnknown: "ReleaseUnknown",
	sendCompleteLapsed: "CompleteLapsed", sendFailLapsed: "FailLapsed", sendRetryLapsed: "RetryLapsed",
	sendReviseLapsed: "ReviseLapsed", sendReleaseLapsed: "ReleaseLapsed",
	sendCompleteCancelled: "CompleteCancelled", sendCancelUnknown: "CancelUnknown",
	sendCompleteCancelPark: "CompleteLapsed at mine+1", sendCancelLapsed: "CancelLapsed",
	sendReleaseRequeued: "ReleaseRequeued",
}

func (d decision) String() string { return decisionNames[d] }

// settleTable lists every cell where a worker that lost its lease sends
// something; every other cell is sendNothing. Each row holds for the
// variants it names.
var settleTable = []struct {
	state, at string
	variants  []string
	k         knowledge
	want      decision
}{
	// Unknown at mine: the reconciler expired the lease of a slow worker.
	// A park and a give-back are sent again from there. A result, and an
	// input or retryable refusal, are not: Complete, and Fail or
	// ScheduleRetry after a refusal, accept unknown at mine already, so
	// their refusal found the task elsewhere and the reconciler decides.
	{"unknown", atMine, every, knowUnsaved, sendParkUnknown},
	{"unknown", atMine, every, knowRefusedPark, sendParkUnknown},
	{"unknown", atMine, every, knowNoCall, sendReleaseUnknown},

	// Queued at mine with the attempt still counted: the reconciler
	// re-queued the lapsed lease (an outcome perhaps left open). Only the
	// worker knows it made no call: it gives the attempt back.
	{"queued", atMine, []string{plain, gated, marked, saved, retried}, knowNoCall, sendReleaseRequeued},

	// Parked unknown_outcome at mine (no readback after the expiry): what
	// the worker knows settles the park and resolves its review.
	{parkedUO, atMine, every, knowResult, sendCompleteLapsed},
	{parkedUO, atMine, every, knowUnsaved, sendReviseLapsed},
	{parkedUO, atMine, every, knowRefusedInput, sendFailLapsed},
	{parkedUO, atMine, every, knowRefusedRetry, sendRetryLapsed},
	{parkedUO, atMine, every, knowRefusedPark, sendReviseLapsed},
	{parkedUO, atMine, every, knowNoCall, sendReleaseLapsed},

	// A cancel while running fenced mine and nothing has decided since:
	// the reply in hand is saved (cancel_too_late), unless an approval
	// would open on it; a refusal, or no call after the mark, ends it
	// cancelled — marked or not: a provider that deduplicates is never
	// marked, so only the worker knows it made no call. With a result on
	// the item it is decided already.
	{"unknown", cancelAtMine, []string{plain, marked, retried, givenBack, reset, readBack}, knowResult, sendCompleteCancelled},
	{"unknown", cancelAtMine, []string{gated}, knowResult, sendCancelUnknown},
	{"unknown", cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowRefusedInput, sendCancelUnknown},
	{"unknown", cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowRefusedRetry, sendCancelUnknown},
	{"unknown", cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowRefusedPark, sendCancelUnknown},
	{"unknown", cancelAtMine, []string{plain, gated, marked, givenBack, reset, readBack}, knowNoCall, sendCancelUnknown},
	// A retry-safe call cut by the cancel: what it did costs only money,
	// so the cancel ends it without a readback.
	{"unknown", cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowCharged, sendCancelUnknown},

	// The same cancel, parked unknown_outcome by the reconciler: the same,
	// resolving the park — except a gated reply, which nothing may use.
	{parkedUO, cancelAtMine, []string{plain, marked, retried, givenBack, reset, readBack}, knowResult, sendCompleteCancelPark},
	{parkedUO, cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowRefusedInput, sendCancelLapsed},
	{parkedUO, cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowRefusedRetry, sendCancelLapsed},
	{parkedUO, cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowRefusedPark, sendCancelLapsed},
	{parkedUO, cancelAtMine, []string{plain, gated, marked, givenBack, reset, readBack}, knowNoCall, sendCancelLapsed},
	{parkedUO, cancelAtMine, []string{plain, gated, marked, retried, givenBack, reset, readBack}, knowCharged, sendCancelLapsed},
}

// settleRead builds the task of one cell.
func settleRead(state, at, variant string) *ledger.Task {
	t := &ledger.Task{TaskID: "t_settle", State: ledger.State(state), AssignmentVersion: settleMine, Attempts: 1, ClaimedMs: 1, OpenUnknownMs: 1}
	switch state {
	case parkedUO:
		t.State, t.ReviewReason = ledger.StateNeedsReview, ledger.ReviewUnknownOutcome
	case parkedOther:
		t.State, t.ReviewReason = ledger.StateNeedsReview, ledger.ReviewBudgetExhausted
	}
	switch at {
	case pastMine:
		t.AssignmentVersion = settleMine + 1
	case cancelAtMine:
		t.AssignmentVersion, t.CancelVersion = settleMine+1, settleMine
	case cancelAtOther:
		t.AssignmentVersion, t.CancelVersion = settleMine+2, settleMine+1
	}
	switch variant {
	case gated:
		t.ApprovalRequired = true
	case marked:
		t.CallStartedVersion = settleMine
	case saved:
		t.Result = `{"text":"saved"}`
	case retried:
		t.Attempts = 2
	case givenBack:
		t.Attempts, t.ClaimedMs = 0, 0
	case reset:
		t.Attempts = 0
	case readBack:
		t.OpenUnknownMs, t.ErrorClass = 0, ledger.ErrorReadbackAbsent
	}
	return t
}

func TestSettleSendsTheTablesTransitionInEveryCell(t *testing.T) {
	t.Parallel()
	want := map[string]decision{}
	key := func(state, at, variant string, k knowledge) string {
		return fmt.Sprintf("%s / %s / %s / %s", state, at, variant, knowledgeNames[k])
	}
	for _, row := range settleTable {
		for _, v := range row.variants {
			want[key(row.state, row.at, v, row.k)] = row.want
		}
	}
	cells := 0
	for _, state := range settleStates {
		for _, at := range settleVersions {
			for _, v := range every {
				for k := range knowKinds {
					read := settleRead(state, at, v)
					before := *read
					got := settle(read, settleMine, k)
					cells++
					name := key(state, at, v, k)
					if got != want[name] {
						t.Errorf("%s: settle = %v, want %v", name, got, want[name])
					}
					if !reflect.DeepEqual(*read, before) {
						t.Errorf("%s: settle changed the task it was given", name)
					}
					checkSettleInvariants(t, name, read, k, got)
				}
			}
		}
	}
	for k := range knowKinds {
		if got := settle(nil, settleMine, k); got != sendNothing {
			t.Errorf("gone / %s: settle = %v, want nothing", knowledgeNames[k], got)
		}
	}
	if want := len(settleStates) * len(settleVersions) * len(every) * int(knowKinds); cells != want {
		t.Fatalf("checked %d cells, want %d", cells, want)
	}
}

// checkSettleInvariants asserts the rules DESIGN §14 sets for a worker that
// lost its lease, whatever the table says.
func checkSettleInvariants(t *testing.T, name string, read *ledger.Task, k knowledge, d decision) {
	t.Helper()
	atMineNow := read.AssignmentVersion == settleMine
	cancelOfMine := read.AssignmentVersion == settleMine+1 && read.CancelVersion == settleMine
	switch d {
	case sendCompleteLapsed, sendFailLapsed, sendRetryLapsed, sendReviseLapsed, sendReleaseLapsed, sendParkUnknown, sendReleaseUnknown, sendReleaseRequeued:
		// These act on the worker's own assignment only.
		if !atMineNow {
			t.Errorf("%s: %v on a task whose version moved past mine", name, d)
		}
	case sendCompleteCancelled, sendCancelUnknown, sendCompleteCancelPark, sendCancelLapsed:
		// The version moved past mine only by a cancel of mine, from
		// unknown or its park.
		if !cancelOfMine || (read.State != ledger.StateUnknown && read.ReviewReason != ledger.ReviewUnknownOutcome) {
			t.Errorf("%s: %v on a task no cancel of mine left", name, d)
		}
	}
	switch d {
	case sendParkUnknown, sendReleaseUnknown, sendCompleteCancelled, sendCancelUnknown:
		if read.State != ledger.StateUnknown {
			t.Errorf("%s: %v on a task that is not unknown", name, d)
		}
	case sendReleaseRequeued:
		if read.State != ledger.StateQueued || read.ClaimedMs == 0 || read.Attempts == 0 || read.OpenUnknownMs == 0 && read.ErrorClass == ledger.ErrorReadbackAbsent || k != knowNoCall {
			t.Errorf("%s: %v gives back what is no attempt of a call never made", name, d)
		}
	case sendCompleteLapsed, sendFailLapsed, sendRetryLapsed, sendReviseLapsed, sendReleaseLapsed, sendCompleteCancelPark, sendCancelLapsed:
		if read.State != ledger.StateNeedsReview || read.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Errorf("%s: %v on a task not parked unknown_outcome", name, d)
		}
	}
	switch k {
	case knowMayHaveActed:
		// The provider may have acted: only the reconciler's readback or
		// park may decide, never a retry or a give-back.
		if d != sendNothing {
			t.Errorf("%s: %v although the provider may have acted", name, d)
		}
	case knowCharged:
		// A retry-safe call: settled only by ending a cancel of it, never
		// a park, a completion or a give-back.
		if d != sendNothing && d != sendCancelUnknown && d != sendCancelLapsed {
			t.Errorf("%s: %v for a retry-safe call", name, d)
		}
	case knowNoCall:
		// No call: the task is never left (or put) in a park saying the
		// provider may have acted.
		if d == sendParkUnknown || d == sendReviseLapsed {
			t.Errorf("%s: %v for an assignment that made no call", name, d)
		}
		if atMineNow && read.State == ledger.StateNeedsReview && read.ReviewReason == ledger.ReviewUnknownOutcome && d != sendReleaseLapsed {
			t.Errorf("%s: %v leaves the unknown_outcome park of a call never made", name, d)
		}
		// A cancel of a first attempt with nothing saved ends cancelled: the
		// reconciler cannot tell an unmarked call that never started from one
		// in flight. After earlier attempts, their calls are the reconciler's.
		if cancelOfMine && !read.HasResult() && (read.State == ledger.StateUnknown || read.ReviewReason == ledger.ReviewUnknownOutcome) &&
			read.Attempts <= 1 &&
			d != sendCancelUnknown && d != sendCancelLapsed {
			t.Errorf("%s: %v for a cancel of an assignment that made no call", name, d)
		}
		if cancelOfMine && read.Attempts > 1 && d != sendNothing {
			t.Errorf("%s: %v ends a cancel whose earlier attempts' calls only a readback can settle", name, d)
		}
	}
}

func TestOnlyUnknownOrItsParkAtMineLetAFencedCallRunOn(t *testing.T) {
	t.Parallel()
	for _, state := range settleStates {
		for _, at := range settleVersions {
			read := settleRead(state, at, plain)
			want := at == atMine && (state == "unknown" || state == parkedUO)
			if got := stillOurs(read, settleMine); got != want {
				t.Errorf("%s / %s: stillOurs = %v, want %v", state, at, got, want)
			}
		}
	}
	if stillOurs(nil, settleMine) {
		t.Error("gone: stillOurs = true")
	}
}
