package ledger

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Transition is one row of the task state machine (DESIGN §14; doc.go):
// who moves a task from which states to which, under which condition, and
// what the write changes.
type Transition struct {
	Op                string // the row's unique name
	Method            string // the Ledger method (and variant) that writes it
	Actors            []Actor
	From              []State           // nil: from no item (Create), or the review item alone
	When              map[State][]Guard // guards that apply from one from-state only
	Fence             Fence
	Guards            []Guard // the condition's conjuncts in order, fence and from-states included
	To                State   // "": the state stays as it is
	Attempts, Version Change  // of attempts and assignment_version
	Refusal           Refusal
	Review            ReviewEffect
	Effect            EffectClass
	Repeat            bool // found in To already, the call succeeds and writes nothing
	Manual            bool // the method writes its condition out; Guards documents it
}

type (
	// Actor is who makes a transition.
	Actor string
	// Fence is which assignment a transition must still find.
	Fence string
	// Change is how a transition changes a counter.
	Change string
	// Refusal is what the method returns when the condition fails.
	Refusal string
	// ReviewEffect is what a transition does to the task's review item.
	ReviewEffect string
	// EffectClass says which steps a row serves (DESIGN §14; docs/protocol.md,
	// "Effect classes"): retry-safe, effect, or "" any step.
	EffectClass string
)

// The values of a Transition's fields.
const (
	ActorWorker     Actor = "worker"
	ActorReconciler Actor = "reconciler"
	ActorRequester  Actor = "requester"  // through the HTTP API
	ActorApprover   Actor = "approver"   // through the HTTP API
	ActorOperator   Actor = "operator"   // the review CLI or page
	ActorDispatcher Actor = "dispatcher" // the reconciler's outbox relay
	ActorAdmission  Actor = "admission"  // the worker, waiting for provider admission

	FenceNone Fence = ""
	AtVersion Fence = "at version" // assignment_version = the caller's version argument (doc.go, "Versions")

	Same  Change = ""
	Up    Change = "+1"
	Down  Change = "-1"
	Reset Change = "=0"

	RefusedFenced            Refusal = "*FencedError"
	RefusedNotClaimable      Refusal = "*NotClaimableError"
	RefusedConflict          Refusal = "*ConflictError"
	RefusedDuplicate         Refusal = "*DuplicateError"
	RefusedDeliveriesStarted Refusal = "*DeliveriesStartedError"
	NotApplied               Refusal = "ok=false" // nothing written, no error

	ReviewNone     ReviewEffect = ""
	ReviewOpens    ReviewEffect = "opens"
	ReviewRevises  ReviewEffect = "revises"
	ReviewResolves ReviewEffect = "resolves"

	EffectAny       EffectClass = ""
	EffectRetrySafe EffectClass = "retry-safe"
	EffectEffect    EffectClass = "effect"
)

// Call is what guards compare the item with: the caller's clock and
// version argument, and what it read or names.
type Call struct {
	Now        time.Time
	Version    int64         // the version argument (doc.go, "Versions")
	State      State         // the state the caller read (Park, ClaimDispatch)
	Owner      string        // the claim's lease owner (ReleaseClaim)
	Kind       string        // the only kind a takeover may take ("": any)
	Lease      time.Duration // MarkCallStarted: half of it must be left
	DueAt      int64         // due_at read (ClaimDispatch)
	Dispatches int           // dispatches read (ClaimDispatch)
	SHA256     string        // the result hash read (Reject) or approved (Approve)
	Round      int           // the approval round read
	Parent     string        // a delivery's approved task
	LeaseUntil int64         // a lapsed lease read (CancelRunning), 0: none
	Parks      int           // the park_count read (Park, and the review item's guards)
}

// Guard is one conjunct of a condition: a DynamoDB condition fragment and
// the Go predicate that restates it.
type Guard struct {
	Name  string
	Expr  string               // #attribute names and :value placeholders (Call.value)
	expr  func(c *Call) string // the fragment for c when it varies ("": not tested)
	holds func(t *Task, c *Call) bool
	kind  byte     // 0 a guard, 's' the from-states, 'r' the state read, 'v' of the review item
	ph    []string // the placeholders of the states
}

func guard(name, expr string, holds func(t *Task, c *Call) bool) Guard {
	return Guard{Name: name, Expr: expr, holds: holds}
}

// varying is a guard whose fragment depends on the call (Expr shows it).
func varying(name, doc string, expr func(c *Call) string, holds func(t *Task, c *Call) bool) Guard {
	return Guard{Name: name, Expr: doc, expr: expr, holds: holds}
}

func pick(ok bool, a, b string) string {
	if ok {
		return a
	}
	return b
}

func ms(c *Call) int64 { return c.Now.UnixMilli() }

// fromAs tests the from-states, each under its placeholder.
func fromAs(ph ...string) Guard {
	return Guard{Name: "from", Expr: "#state = :" + ph[0], kind: 's', ph: ph}
}

// readState: the item is in the state the caller read.
func readState(ph string) Guard {
	return Guard{Name: "from", Expr: "#state = :" + ph + " (as read)", kind: 'r', ph: []string{ph}}
}

var (
	atMine  = guard("fence", "#assignment_version = :mine", atVersion)
	atVer   = guard("fence", "#assignment_version = :ver", atVersion)
	inFrom  = Guard{Name: "from", Expr: "#state = :from OR #state = :from1 ...", kind: 's'}
	inFromC = fromAs("c_queued", "c_retry", "c_running")

	gExists         = guard("exists", "attribute_exists(#task_id)", func(*Task, *Call) bool { return true })
	gAttemptsLeft   = guard("attempts left", "#attempts < #max_attempts", func(t *Task, _ *Call) bool { return t.Attempts < t.MaxAttempts })
	gBeforeDeadline = guard("before the age deadline", "#deadline_ms > :now", func(t *Task, c *Call) bool { return t.DeadlineMs > ms(c) })
	gDue            = guard("due", "#not_before <= :now", func(t *Task, c *Call) bool { return t.NotBefore != 0 && t.NotBefore <= ms(c) })
	gLeaseExpired   = guard("lease expired", "#lease_until < :now", func(t *Task, c *Call) bool { return t.LeaseUntil != 0 && t.LeaseUntil < ms(c) })
	gLeaseFresh     = guard("half a lease left", "#lease_until >= :fresh", func(t *Task, c *Call) bool {
		return t.LeaseUntil != 0 && t.LeaseUntil >= c.Now.Add(c.Lease/2).UnixMilli()
	})
	gTakeoverKind = varying("of the takeover kind", "#kind = :takeover_kind (when given)",
		func(c *Call) string { return pick(c.Kind != "", "#kind = :takeover_kind", "") },
		func(t *Task, c *Call) bool { return c.Kind == "" || t.Kind == c.Kind })
	gGateOff = guard("no approval gate", "attribute_not_exists(#approval_required) OR #approval_required = :gate_off",
		func(t *Task, _ *Call) bool { return !t.ApprovalRequired })
	gGateOn       = guard("approval gate", "#approval_required = :gate_on", func(t *Task, _ *Call) bool { return t.ApprovalRequired })
	gNoResult     = guard("no result yet", "attribute_not_exists(#result) AND attribute_not_exists(#result_ref)", func(t *Task, _ *Call) bool { return !t.HasResult() })
	gCancelOfPrev = guard("cancel of the version before", "#cancel_version = :cancelled", func(t *Task, c *Call) bool {
		return t.CancelVersion != 0 && t.CancelVersion == c.Version-1
	})
	// A task unknown at v after a cancel at v-1 is that cancel's state.
	gNoCancelPending = guard("running, or no cancel pending", "#state = :from OR attribute_not_exists(#cancel_version) OR #cancel_version < :before",
		func(t *Task, c *Call) bool {
			return t.State == StateRunning || t.CancelVersion == 0 || t.CancelVersion < c.Version-1
		})
	gNotStarted = guard("call not started", "attribute_not_exists(#call_started_version) OR #call_started_version <> :mine",
		func(t *Task, c *Call) bool { return t.CallStartedVersion == 0 || t.CallStartedVersion != c.Version })
	gParkedUnknown = guard("parked unknown_outcome", "#review_reason = :lapsed_reason", func(t *Task, _ *Call) bool { return t.ReviewReason == ReviewUnknownOutcome })
	gOwner         = guard("my lease owner", "#lease_owner = :owner", func(t *Task, c *Call) bool { return t.LeaseOwner != "" && t.LeaseOwner == c.Owner })
	gVersionGiven  = varying("at version (when given)", "#assignment_version = :mine (when given)",
		func(c *Call) string { return pick(c.Version > 0, "#assignment_version = :mine", "") },
		func(t *Task, c *Call) bool { return c.Version == 0 || t.AssignmentVersion == c.Version })
	gDueAsRead  = guard("due_at as read", "#due_at = :old_due", func(t *Task, c *Call) bool { return t.DueAt != 0 && t.DueAt == c.DueAt })
	gDispatches = varying("dispatches as read", "#dispatches = :old_dispatches (or absent for 0)",
		func(c *Call) string {
			return pick(c.Dispatches == 0, "attribute_not_exists(#dispatches) OR #dispatches = :old_dispatches", "#dispatches = :old_dispatches")
		},
		func(t *Task, c *Call) bool { return t.Dispatches == c.Dispatches })
	gArtifact     = guard("result is the approved artifact", "#result_sha256 = :artifact", resultIs)
	gSeen         = guard("result as read", "#result_sha256 = :seen", resultIs)
	gApprovalOpen = guard("before the approval deadline", "attribute_not_exists(#approval_deadline_ms) OR #approval_deadline_ms > :approve_now",
		func(t *Task, c *Call) bool { return t.ApprovalDeadlineMs == 0 || t.ApprovalDeadlineMs > ms(c) })
	gRound = varying("approval round as read", "#approval_round = :round (absent for round 0)",
		func(c *Call) string {
			return pick(c.Round == 0, "attribute_not_exists(#approval_round)", "#approval_round = :round")
		},
		func(t *Task, c *Call) bool { return t.ApprovalRound == c.Round })
	gApproved  = guard("approved", "#approval_state = :approved", func(t *Task, _ *Call) bool { return t.ApprovalState == ApprovalApproved })
	gUnstarted = guard("never claimed", "#assignment_version = :zero", func(t *Task, _ *Call) bool { return t.AssignmentVersion == 0 })
	// CancelRunning dates the call's uncertainty from a lapsed lease it read,
	// true only while nothing renewed it: a resumed worker may call after.
	gLapsedLeaseAsRead = varying("lapsed lease as read (when given)", "#lease_until = :read_lease (when given)",
		func(c *Call) string { return pick(c.LeaseUntil > 0, "#lease_until = :read_lease", "") },
		func(t *Task, c *Call) bool { return c.LeaseUntil == 0 || t.LeaseUntil == c.LeaseUntil })
	// A park decided on a read from before another park and an operator's
	// retry (queued at the parked version) would undo that retry, and its
	// number would repeat the earlier park's, which its commands name.
	gParksAsRead = varying("park count as read", "#park_count = :parks_read (absent for 0)",
		func(c *Call) string {
			return pick(c.Parks == 0, "attribute_not_exists(#park_count)", "#park_count = :parks_read")
		},
		func(t *Task, c *Call) bool { return t.ParkCount == c.Parks })
	gUnindexed = guard("not in by_state", "attribute_not_exists(#state_shard)", func(t *Task, _ *Call) bool { return t.StateShard == "" })
	gParent    = guard("of the approved task", "#parent_task_id = :parent", func(t *Task, c *Call) bool { return t.ParentTaskID != "" && t.ParentTaskID == c.Parent })
	// Every give-back removes claimed_ms and an operator's retry resets
	// attempts: neither leaves an attempt to give back. Without it a
	// give-back repeated after a lost reply, the task since moved to unknown
	// (AwaitReadback) and perhaps parked at the same version, would give
	// back another attempt's count.
	gAttemptCounted = guard("attempt still counted", "attribute_exists(#claimed_ms) AND #attempts > :zero",
		func(t *Task, _ *Call) bool { return t.ClaimedMs > 0 && t.Attempts > 0 })
	// A re-queue after a readback found nothing (readback_absent,
	// open_unknown_ms removed) settled every attempt's outcome: nothing is
	// left to void or restore. A re-queue with no call started
	// (RequeueUnstarted) leaves no outcome open; its attempt is still the
	// worker's to give back.
	gLapseOpen = guard("attempt counted, not read back absent",
		"attribute_exists(#claimed_ms) AND #attempts > :zero AND (attribute_exists(#open_unknown_ms) OR attribute_not_exists(#error_class) OR #error_class <> :readback_absent)",
		func(t *Task, _ *Call) bool {
			return t.ClaimedMs > 0 && t.Attempts > 0 && (t.OpenUnknownMs > 0 || t.ErrorClass != ErrorReadbackAbsent)
		})

	// Written out by Create.
	gAbsent        = guard("no item", "attribute_not_exists(#id)", func(*Task, *Call) bool { return false })
	gPastRetention = guard("past retention, as read", "#exp = :old_exp AND #exp < :now_s AND #ver = :old_ver",
		func(t *Task, c *Call) bool { return t.PastRetention(c.Now) })
	// Of the review item.
	gReviewLapsed = Guard{Name: "review open unknown_outcome", Expr: "#review_status = :open AND #reason = :lapsed_reason", kind: 'v'}
	gReviewAt     = Guard{Name: "review open at the park", Expr: "#review_status = :open AND #park_count = :pc", kind: 'v'}
	gReviewRevise = Guard{Name: "review open unknown_outcome at the park", Expr: "#review_status = :open AND #reason = :lapsed_reason AND #park_count = :park_count", kind: 'v'}
	gNoOpenReview = Guard{Name: "no open review", Expr: "attribute_not_exists(#id) OR #rs = :resolved", kind: 'v'}
)

func atVersion(t *Task, c *Call) bool { return t.AssignmentVersion == c.Version }
func resultIs(t *Task, c *Call) bool  { return t.ResultSHA256 != "" && t.ResultSHA256 == c.SHA256 }

func states(s ...State) []State { return s }
func actors(a ...Actor) []Actor { return a }
func guards(g ...Guard) []Guard { return g }

var (
	byWorker, byReconciler, byEither = actors(ActorWorker), actors(ActorReconciler), actors(ActorWorker, ActorReconciler)
	byRequester, byApprover          = actors(ActorRequester), actors(ActorApprover)
	byOperator                       = actors(ActorOperator)
	fromRunning, fromUnknown         = states(StateRunning), states(StateUnknown)
	fromRunOrUnknown, fromParked     = states(StateRunning, StateUnknown), states(StateNeedsReview)
	fromAwaiting                     = states(StateAwaitingApproval)
	fromUnsettled                    = states(StateQueued, StateRetryWait, StateRunning, StateUnknown)
	claimWhen                        = map[State][]Guard{StateRetryWait: {gDue}}
	gFenced                          = guards(atMine, inFrom)
	gComplete, gCompleteGated        = guards(gGateOff, atMine, inFrom, gNoResult), guards(gGateOn, atMine, inFrom, gNoResult)
	gLapsed                          = guards(atMine, inFrom, gParkedUnknown, gReviewLapsed)
	gOperator                        = guards(fromAs("parked"), atVer, gReviewAt)
	gPark                            = guards(atVer, readState("expect"), gParksAsRead, gNoOpenReview)
	gExpireApproval                  = guards(atVer, readState("expect"), gParksAsRead, gDueAsRead, gNoOpenReview)
)

// transitions is the task state machine: every write of a task item.
var transitions = []Transition{
	// Submission (create.go).
	{Op: "create", Method: "Create", Actors: byRequester, Guards: guards(gAbsent), To: StateQueued, Refusal: RefusedDuplicate, Manual: true},
	{Op: "recreate", Method: "Create (item past retention)", Actors: byRequester, Fence: AtVersion, From: states(StateCompleted, StateFailed, StateCancelled, StateRejected),
		Guards: guards(gPastRetention), To: StateQueued, Attempts: Reset, Refusal: RefusedDuplicate, Manual: true},

	// The worker's attempt.
	{Op: "claim", Method: "Claim", Actors: byWorker, From: states(StateQueued),
		Guards: guards(gExists, gAttemptsLeft, gBeforeDeadline, fromAs("c_queued")), To: StateRunning, Attempts: Up, Version: Up, Refusal: RefusedNotClaimable},
	// Claim's second write, once refused by a retry_wait task: it also moves
	// the by_state entry to active (a queued task's entry is there already).
	{Op: "claim_retry", Method: "Claim (a retry_wait task)", Actors: byWorker, From: states(StateRetryWait), When: claimWhen,
		Guards: guards(gExists, gAttemptsLeft, gBeforeDeadline, fromAs("c_retry")), To: StateRunning, Attempts: Up, Version: Up, Refusal: RefusedNotClaimable},
	// Claim's second write, once refused by an expired lease: the attempt
	// it takes over is left with an open outcome.
	{Op: "claim_takeover", Method: "Claim (AllowTakeover: a running task whose lease expired)", Actors: byWorker, From: fromRunning, Fence: AtVersion,
		Guards: guards(atVer, gAttemptsLeft, gBeforeDeadline, fromAs("c_running"), gLeaseExpired, gTakeoverKind),
		To:     StateRunning, Attempts: Up, Version: Up, Refusal: RefusedNotClaimable, Effect: EffectRetrySafe},
	fencedRow("renew", "Renew", byWorker, fromRunning, gFenced, StateRunning),
	fencedRow("call_started", "MarkCallStarted", byWorker, fromRunning, guards(atMine, inFrom, gLeaseFresh), StateRunning, effectOnly),
	fencedRow("call_started_renew", "MarkCallStarted (lease too short: renewed)", byWorker, fromRunning, gFenced, StateRunning, effectOnly),
	fencedRow("complete", "Complete", byWorker, fromRunOrUnknown, gComplete, StateCompleted),
	fencedRow("complete_gated", "Complete (approval gate)", byWorker, fromRunOrUnknown, gCompleteGated, StateAwaitingApproval),
	fencedRow("complete_follow_ups", "Complete (WithFollowUps: a plan's deliveries, notifications)", byWorker, fromRunOrUnknown, gComplete, StateCompleted),
	fencedRow("complete_gated_follow_ups", "Complete (approval gate, WithFollowUps: the approvers' notification)", byWorker, fromRunOrUnknown, gCompleteGated,
		StateAwaitingApproval),
	fencedRow("retry", "ScheduleRetry", byWorker, fromRunning, gFenced, StateRetryWait),
	fencedRow("retry_after_refusal", "ScheduleRetry (AfterRefusal)", byWorker, fromRunOrUnknown, gFenced, StateRetryWait),
	fencedRow("retry_uncertain", "ScheduleRetryUncertain", byWorker, fromRunning, gFenced, StateRetryWait),
	fencedRow("fail", "Fail", byWorker, fromRunning, gFenced, StateFailed),
	fencedRow("fail_follow_ups", "Fail (WithFollowUps: the requester's notification)", byWorker, fromRunning, gFenced, StateFailed),
	fencedRow("fail_after_refusal", "Fail (AfterRefusal)", byWorker, fromRunOrUnknown, gFenced, StateFailed),
	fencedRow("unknown", "MarkUnknown", byWorker, fromRunning, gFenced, StateUnknown, effectOnly),
	fencedRow("release", "Release", byWorker, fromRunning, gFenced, StateQueued, givesBack),
	fencedRow("release_unknown", "ReleaseUnknown", byWorker, fromUnknown, guards(atMine, inFrom, gAttemptCounted), StateQueued, givesBack),
	fencedRow("release_requeued", "ReleaseRequeued", byWorker, states(StateQueued), guards(atMine, inFrom, gLapseOpen), StateQueued, givesBack),
	{Op: "release_claim", Method: "ReleaseClaim", Actors: byWorker, From: fromRunning, Guards: guards(gOwner, fromAs("running"), gVersionGiven),
		To: StateQueued, Attempts: Down, Refusal: NotApplied},
	fencedRow("wait_admission", "WaitAdmission", actors(ActorAdmission), fromRunning, gFenced, StateRetryWait, givesBack),

	// The reconciler.
	fencedRow("requeue", "Requeue (from running)", byReconciler, fromRunning, guards(atMine, inFrom, gLeaseExpired), StateQueued, retrySafe),
	fencedRow("requeue_unstarted", "RequeueUnstarted", byReconciler, fromRunning, guards(atMine, inFrom, gLeaseExpired, gNotStarted), StateQueued),
	fencedRow("expire", "ExpireToUnknown", byReconciler, fromRunning, guards(atMine, inFrom, gLeaseExpired), StateUnknown, effectOnly),
	fencedRow("complete_readback", "CompleteFromReadback", byReconciler, fromUnknown, gComplete, StateCompleted),
	fencedRow("complete_readback_gated", "CompleteFromReadback (approval gate)", byReconciler, fromUnknown, gCompleteGated, StateAwaitingApproval),
	fencedRow("requeue_readback_absent", "Requeue (from unknown)", byReconciler, fromUnknown, gFenced, StateQueued),
	fencedRow("requeue_readback_absent_call_may_run", "RequeueCallMayRun", byReconciler, fromUnknown, gFenced, StateQueued),
	fencedRow("requeue_retry_safe", "RequeueRetrySafe", byReconciler, fromUnknown, gFenced, StateQueued, retrySafe),
	fencedRow("await_readback", "AwaitReadback", byReconciler, states(StateQueued, StateRetryWait), gFenced, StateUnknown, effectOnly),
	fencedRow("defer_readback", "DeferReadback", byReconciler, fromUnknown, gFenced, StateUnknown),
	// A submitted task the watch found still queued or running (watch.go).
	{Op: "adopt", Method: "Adopt", Actors: byReconciler, From: states(StateQueued, StateRunning), Guards: guards(inFrom, gUnindexed), Refusal: NotApplied},
	{Op: "dispatch", Method: "ClaimDispatch (DeferDispatch: held back by a backlog)", Actors: actors(ActorDispatcher), From: states(StateQueued, StateRetryWait),
		Guards: guards(readState("from"), gDueAsRead, gDispatches, gAttemptsLeft), Refusal: NotApplied},
	fencedRow("park", "Park", byEither, fromUnsettled, gPark, StateNeedsReview, conflicts, opens),
	fencedRow("park_expired_lease", "Park (LeaseExpired)", byEither, fromRunning, guards(atVer, readState("expect"), gParksAsRead, gLeaseExpired, gNoOpenReview), StateNeedsReview,
		conflicts, opens),
	fencedRow("park_follow_ups", "Park (FollowUps: the requester's notification)", byEither, fromUnsettled, gPark, StateNeedsReview, conflicts, opens),
	// Each follow-up task, put in its write's transaction (followup.go).
	{Op: "follow_up", Method: "Complete (and Fail, Park, Approve, Withdraw and the other settling writes: each follow-up task, in the same transaction)",
		Actors: actors(ActorWorker, ActorReconciler, ActorApprover),
		Guards: guards(gAbsent), To: StateQueued, Refusal: RefusedConflict, Manual: true},
	{Op: "clamp_due", Method: "Release (and the other writes to queued: due_at clamped to the age deadline)", Actors: byEither,
		From: states(StateQueued), Guards: guards(gDueAsRead, fromAs("queued")), Refusal: NotApplied},
	{Op: "put_poison", Method: "PutPoison", Actors: byReconciler, Guards: guards(gAbsent), Refusal: NotApplied, Review: ReviewOpens, Manual: true},

	// Cancel (cancel.go).
	{Op: "cancel", Method: "Cancel", Actors: byRequester, From: states(StateQueued, StateRetryWait), Guards: guards(gExists, inFromC),
		To: StateCancelled, Refusal: RefusedConflict, Repeat: true},
	{Op: "cancel_running", Method: "CancelRunning", Actors: byRequester, From: fromRunOrUnknown, Fence: AtVersion, Guards: guards(atMine, inFrom, gNoCancelPending, gLapsedLeaseAsRead),
		To: StateUnknown, Version: Up, Refusal: RefusedConflict},
	fencedRow("cancel_unknown", "CancelUnknown", byEither, fromUnknown, guards(atMine, inFrom, gCancelOfPrev), StateCancelled),
	fencedRow("complete_cancelled", "CompleteCancelled", byWorker, fromUnknown, guards(gGateOff, atMine, inFrom, gCancelOfPrev, gNoResult), StateCompleted),
	fencedRow("complete_cancelled_gated", "CompleteCancelled (approval gate)", byWorker, fromUnknown, guards(gGateOn, atMine, inFrom, gCancelOfPrev, gNoResult),
		StateAwaitingApproval),

	// A lapsed attempt settles its unknown_outcome park (lapsed.go).
	fencedRow("complete_lapsed", "CompleteLapsed", byWorker, fromParked, guards(gGateOff, gNoResult, atMine, inFrom, gParkedUnknown, gReviewLapsed), StateCompleted,
		resolves),
	fencedRow("complete_lapsed_gated", "CompleteLapsed (approval gate)", byWorker, fromParked, guards(gGateOn, gNoResult, atMine, inFrom, gParkedUnknown, gReviewLapsed),
		StateAwaitingApproval, resolves),
	fencedRow("fail_lapsed", "FailLapsed", byWorker, fromParked, gLapsed, StateFailed, resolves),
	fencedRow("retry_lapsed", "RetryLapsed", byWorker, fromParked, gLapsed, StateRetryWait, resolves),
	fencedRow("release_lapsed", "ReleaseLapsed", byWorker, fromParked, guards(atMine, inFrom, gAttemptCounted, gParkedUnknown, gReviewLapsed), StateQueued, givesBack, resolves),
	fencedRow("cancel_lapsed", "CancelLapsed", byWorker, fromParked, guards(gCancelOfPrev, atMine, inFrom, gParkedUnknown, gReviewLapsed), StateCancelled, resolves),
	fencedRow("revise_lapsed", "ReviseLapsed", byWorker, fromParked, gLapsed, StateNeedsReview, revises),
	{Op: "revise_lapsed_review", Method: "ReviseLapsedReview", Actors: byWorker, Guards: guards(gReviewRevise), Refusal: RefusedConflict, Review: ReviewRevises, Manual: true},

	// Approval gates (approval.go).
	{Op: "approve_delivery", Method: "Approve (each delivery, in the same transaction)", Actors: byApprover, Guards: guards(gAbsent),
		To: StateQueued, Refusal: RefusedConflict, Manual: true},
	{Op: "approve", Method: "Approve", Actors: byApprover, From: fromAwaiting, Guards: guards(fromAs("awaiting"), gArtifact, gApprovalOpen, gRound),
		To: StateCompleted, Refusal: RefusedConflict},
	{Op: "reject", Method: "Reject", Actors: byApprover, From: fromAwaiting, Guards: guards(fromAs("awaiting"), gSeen),
		To: StateRejected, Refusal: RefusedConflict, Repeat: true},
	{Op: "withdraw", Method: "Withdraw", Actors: byApprover, From: states(StateCompleted), Guards: guards(fromAs("completed"), gApproved, gRound),
		To: StateAwaitingApproval, Refusal: RefusedConflict},
	{Op: "withdraw_delivery", Method: "Withdraw (each delivery)", Actors: byApprover, From: states(StateQueued), Guards: guards(fromAs("queued"), gUnstarted, gParent),
		To: StateCancelled, Refusal: RefusedDeliveriesStarted},
	fencedRow("expire_approval", "ExpireApproval", byReconciler, fromAwaiting, gExpireApproval, StateNeedsReview, conflicts, opens),
	fencedRow("expire_approval_follow_ups", "ExpireApproval (followUps: the requester's notification)", byReconciler, fromAwaiting, gExpireApproval,
		StateNeedsReview, conflicts, opens),

	// An operator's decision on the review item (operator.go).
	fencedRow("operator_retry", "Act (retry)", byOperator, fromParked, gOperator, StateQueued, conflicts, resolves, freshBudget),
	// A gated task completes only through an approval (DESIGN §10).
	fencedRow("operator_completed", "Act (completed)", byOperator, fromParked, guards(gGateOff, fromAs("parked"), atVer, gReviewAt), StateCompleted, conflicts, resolves),
	fencedRow("operator_failed", "Act (failed)", byOperator, fromParked, gOperator, StateFailed, conflicts, resolves),
}

// rowOpt sets a field of a row.
type rowOpt func(*Transition)

// fencedRow is a row fenced at version, refused (unless opts say
// otherwise) with *FencedError: mostly the assignment holder's writes.
func fencedRow(op, method string, by []Actor, from []State, g []Guard, to State, opts ...rowOpt) Transition {
	tr := Transition{Op: op, Method: method, Actors: by, From: from, Fence: AtVersion, Guards: g, To: to, Refusal: RefusedFenced}
	for _, o := range opts {
		o(&tr)
	}
	return tr
}

// The rows' options.
var (
	conflicts   rowOpt = func(tr *Transition) { tr.Refusal = RefusedConflict }
	opens       rowOpt = func(tr *Transition) { tr.Review = ReviewOpens }
	givesBack   rowOpt = func(tr *Transition) { tr.Attempts = Down }
	freshBudget rowOpt = func(tr *Transition) { tr.Attempts = Reset }
	retrySafe   rowOpt = func(tr *Transition) { tr.Effect = EffectRetrySafe }
	effectOnly  rowOpt = func(tr *Transition) { tr.Effect = EffectEffect }
	resolves    rowOpt = func(tr *Transition) { tr.Review = ReviewResolves }
	revises     rowOpt = func(tr *Transition) { tr.Review = ReviewRevises }
)

// Transitions returns a copy of the task state machine's table.
func Transitions() []Transition {
	out := slices.Clone(transitions)
	for i := range out {
		tr := &out[i]
		tr.Actors, tr.From, tr.Guards, tr.When = slices.Clone(tr.Actors), slices.Clone(tr.From), slices.Clone(tr.Guards), maps.Clone(tr.When)
	}
	return out
}

var byOp = func() map[string]*Transition {
	m := map[string]*Transition{}
	for i := range transitions {
		m[transitions[i].Op] = &transitions[i]
	}
	return m
}()

// row returns the transition op (the table must hold it).
func row(op string) *Transition {
	if tr, ok := byOp[op]; ok {
		return tr
	}
	panic("ledger: no transition " + op)
}

// Allows reports whether item t meets the transition's condition for c:
// what DynamoDB would answer, asked in Go.
func (tr *Transition) Allows(t *Task, c Call) bool {
	if t == nil {
		return false
	}
	for i := range tr.Guards {
		if !tr.holds(&tr.Guards[i], t, &c) {
			return false
		}
	}
	return true
}

func (tr *Transition) holds(g *Guard, t *Task, c *Call) bool {
	switch g.kind {
	case 'v':
		return true
	case 'r':
		return t.State == c.State
	case 's':
		ok := slices.Contains(tr.From, t.State)
		for i := range tr.When[t.State] {
			ok = ok && tr.holds(&tr.When[t.State][i], t, c)
		}
		return ok
	}
	return g.holds(t, c)
}

// condition adds tr's condition for c, and its counter changes, to u.
func (tr *Transition) condition(u *update, c *Call) *update {
	for i, ch := range []Change{tr.Version, tr.Attempts} {
		attr := []string{"assignment_version", "attempts"}[i]
		switch ch {
		case Up, Down:
			u.sets = append(u.sets, u.n(attr)+" = "+u.n(attr)+" "+string(ch[0])+" "+u.v("one", num(1)))
		case Reset:
			u.set(attr, num(0))
		}
	}
	// An attempt added starts now; one given back (no provider call) leaves
	// no history (history.go).
	switch tr.Attempts {
	case Up:
		u.set("claimed_ms", num(ms(c)))
	case Down:
		u.remove("claimed_ms")
	}
	for i := range tr.Guards {
		if e := tr.fragment(&tr.Guards[i], u, c); e != "" {
			u.conds = append(u.conds, e)
		}
	}
	return u
}

var placeholder = regexp.MustCompile(`[#:][a-z0-9_]+`)

// placeholders registers on u the #names and :values (value(p), once) of
// expression e, and returns e.
func (u *update) placeholders(e string, value func(p string) types.AttributeValue) string {
	for _, p := range placeholder.FindAllString(e, -1) {
		if p[0] == '#' {
			u.n(p[1:])
		} else if _, ok := u.values[p]; !ok {
			u.values[p] = value(p)
		}
	}
	return e
}

// fragment renders g for c, registering its names and values on u.
func (tr *Transition) fragment(g *Guard, u *update, c *Call) string {
	switch g.kind {
	case 'v':
		return ""
	case 'r':
		return u.n("state") + " = " + u.v(g.ph[0], strState(c.State))
	case 's':
		alts := make([]string, len(tr.From))
		for i, s := range tr.From {
			p := "from" + pick(i > 0, strconv.Itoa(i), "")
			if g.ph != nil {
				p = g.ph[i]
			}
			conj := []string{u.n("state") + " = " + u.v(p, strState(s))}
			for j := range tr.When[s] {
				if e := tr.fragment(&tr.When[s][j], u, c); e != "" {
					conj = append(conj, e)
				}
			}
			alts[i] = strings.Join(conj, " AND ")
			if len(conj) > 1 && len(tr.From) > 1 { // DynamoDB refuses redundant parentheses
				alts[i] = "(" + alts[i] + ")"
			}
		}
		return strings.Join(alts, " OR ")
	}
	e := g.Expr
	if g.expr != nil {
		e = g.expr(c)
	}
	return u.placeholders(e, c.value)
}

// value is the value of a guard's placeholder p for c.
func (c *Call) value(p string) types.AttributeValue {
	nums := map[string]int64{":now": ms(c), ":approve_now": ms(c), ":mine": c.Version, ":ver": c.Version,
		":before": c.Version - 1, ":cancelled": c.Version - 1, ":fresh": c.Now.Add(c.Lease / 2).UnixMilli(), ":old_due": c.DueAt,
		":old_dispatches": int64(c.Dispatches), ":round": int64(c.Round), ":zero": 0, ":read_lease": c.LeaseUntil,
		":parks_read": int64(c.Parks), ":pc": int64(c.Parks), ":park_count": int64(c.Parks)}
	strs := map[string]string{":open": ReviewOpen, ":owner": c.Owner, ":takeover_kind": c.Kind, ":lapsed_reason": ReviewUnknownOutcome,
		":readback_absent": ErrorReadbackAbsent, ":seen": c.SHA256, ":artifact": c.SHA256, ":parent": c.Parent, ":approved": ApprovalApproved}
	if n, ok := nums[p]; ok {
		return num(n)
	}
	if s, ok := strs[p]; ok {
		return str(s)
	}
	if p != ":gate_on" && p != ":gate_off" {
		panic("ledger: a guard names " + p + ", which has no value")
	}
	return &types.AttributeValueMemberBOOL{Value: p == ":gate_on"}
}
