package soak

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Kind is a fault kind of the soak: a row of the report.
type Kind string

// Per-task fault kinds. Each faulted task gets exactly one, on a seeded
// schedule; the rest run the happy path (KindNone).
const (
	KindNone Kind = "none"

	// The worker dies at a step boundary (worker.Hooks), once.
	KillBeforeClaim    Kind = "kill_before_claim"
	KillAfterClaim     Kind = "kill_after_claim"
	KillAfterProvider  Kind = "kill_after_provider"
	KillAfterSave      Kind = "kill_after_save"
	DuplicateDelivery  Kind = "duplicate_delivery"  // the same SQS record delivered twice (concurrently, or again later)
	DuplicateSubmit    Kind = "duplicate_submit"    // the same key and payload, again after the 202
	ConcurrentSubmit   Kind = "concurrent_submit"   // the same key and payload, three callers at once
	KeyReusedPayload   Kind = "key_reused_payload"  // the same key with another payload (after, or racing)
	ProviderLoseReply  Kind = "provider_lose_reply" // accepted and recorded, reply lost (uncertain)
	Provider429        Kind = "provider_429"        // throttled with Retry-After
	Provider5xx        Kind = "provider_5xx"        // two 503s, then success
	Provider4xx        Kind = "provider_4xx"        // permanent: the input is rejected
	ProviderCredential Kind = "provider_credentials"
	ProviderSlow       Kind = "provider_slow"      // slower than the lease: heartbeats
	ProviderExhaust    Kind = "provider_exhaust"   // 5xx on every attempt: attempt budget
	StaleWorker        Kind = "stale_worker"       // pauses after the provider until another worker took over
	DDBThrottle        Kind = "ddb_throttle"       // PutItem (submit), claim or second UpdateItem throttled
	DDBPutLostReply    Kind = "ddb_put_lost_reply" // the task is put, the reply is lost: 503, retried
	SQSSendFailure     Kind = "sqs_send_failure"   // submit's SendMessage fails: the reconciler relays
	SQSSendLostReply   Kind = "sqs_send_lost_reply"
	CancelRace         Kind = "cancel_race" // cancel right after the 202, racing the worker

	// The unforgiving path.
	ClaimLostReply    Kind = "claim_lost_reply"    // the claim is applied, its reply lost; the SDK's retry fails its condition
	CompleteLostReply Kind = "complete_lost_reply" // likewise the completion
	RetryLostReply    Kind = "retry_lost_reply"    // a 503, then likewise the schedule-retry write
	DeadlinePressure  Kind = "deadline_pressure"   // a long call whose record reaches the worker late in its invocation
	OversizedResult   Kind = "oversized_result"    // the provider returns a result above DynamoDB's item limit (saved through the S3 claim-check)
	LargeInput        Kind = "large_input"         // an input above the 4 KiB inline threshold (kept in S3)
	TTLExpired        Kind = "ttl_expired"         // completed, expires_at set in the past (not yet deleted), resubmitted
	// Documents (DESIGN §12; document.go): uploaded through POST /uploads
	// and a PUT to the presigned URL, then named by the submit.
	Document        Kind = "document"         // replayed with the same document, then the key with another version (422)
	DocumentAltered Kind = "document_altered" // other bytes PUT than declared: 422 upload-mismatch, nothing written; then the right bytes

	// Deliver tasks (DESIGN §10; plan_deliver.go): a direct
	// deliver submit to a simulated, non-idempotent destination.
	DeliverOK              Kind = "deliver"                  // notify, no fault
	DeliverLoseReply       Kind = "deliver_lose_reply"       // notify accepts and loses its reply: read back by operation id
	DeliverNoReadback      Kind = "deliver_no_readback"      // crm without readback accepts and loses its reply: parked unknown_outcome
	DeliverLaggingReadback Kind = "deliver_lagging_readback" // publish accepts and loses its reply; its readback shows it only later
)

// Run-wide fault kinds (rows without tasks of their own).
const (
	ReconcilerRace Kind = "reconciler_race" // two reconcilers run at once on a tick
	PoisonMessage  Kind = "poison_message"  // a body that is no task reference (task queue or DLQ)
	BackgroundAWS  Kind = "background_aws"  // seeded-rate AWS faults on any call of the handlers
	QueueBacklog   Kind = "queue_backlog"   // the poller stops for longer than the dispatch deadline while tasks arrive
)

// TaskKinds lists the per-task fault kinds in report order.
func TaskKinds() []Kind {
	return append([]Kind{
		KillBeforeClaim, KillAfterClaim, KillAfterProvider, KillAfterSave,
		DuplicateDelivery, DuplicateSubmit, ConcurrentSubmit, KeyReusedPayload,
		ProviderLoseReply, Provider429, Provider5xx, Provider4xx, ProviderCredential, ProviderSlow, ProviderExhaust,
		StaleWorker, DDBThrottle, DDBPutLostReply, SQSSendFailure, SQSSendLostReply, CancelRace,
		ClaimLostReply, CompleteLostReply, RetryLostReply, DeadlinePressure, OversizedResult, TTLExpired,
		LargeInput, Document, DocumentAltered,
		DeliverOK, DeliverLoseReply, DeliverNoReadback, DeliverLaggingReadback,
		BudgetTight, ChainBudget, QuotaExceeded, AdmissionWait, CancelRunning,
	}, append(append(workflowKinds(), followUpKinds()...), streamKinds()...)...)
}

// AllKinds lists every fault kind in report order (KindNone excluded).
func AllKinds() []Kind {
	return append(TaskKinds(), ReconcilerRace, PoisonMessage, BackgroundAWS, QueueBacklog)
}

// expected are the final states a task of each kind may legitimately end
// in; anything else is reported (not a violation: budgets can legitimately
// park a task).
func expected(t *task) []ledger.State {
	if e := workflowExpected(t); e != nil {
		return e
	}
	if e := expectedSpend(t.kind); e != nil {
		return e
	}
	if e := expectedFollowUp(t.kind); e != nil {
		return e
	}
	if e := expectedStream(t.kind); e != nil {
		return e
	}
	switch t.kind {
	case Provider4xx:
		return []ledger.State{ledger.StateFailed}
	case ProviderCredential, ProviderExhaust, DeliverNoReadback:
		return []ledger.State{ledger.StateNeedsReview}
	case CancelRace:
		// A cancel that reached a running task follows the unknown rules:
		// needs_review (unknown_outcome) when the call may have acted and
		// nothing can read it back (cancel_inconsistent checks the reason).
		return []ledger.State{ledger.StateCancelled, ledger.StateCompleted, ledger.StateNeedsReview}
	}
	return []ledger.State{ledger.StateCompleted}
}

// task is one planned submission.
type task struct {
	i      int
	key    string
	id     string
	kind   Kind
	input  string // the input object submitted
	other  string // KeyReusedPayload: the other input
	racing bool   // KeyReusedPayload / DuplicateDelivery variant
	parent *task  // ChainBudget: the chain's root of a regenerate (chain.go)
}

// plan assigns kinds to tasks: ceil(share×n) faulted tasks take the task
// kinds round-robin, the document kinds a share more each, the rest none,
// then a seeded shuffle.
func plan(n int, share float64, seed int64, scope string) []*task {
	faulted := int(float64(n)*share + 0.999999)
	faulted = min(max(faulted, 0), n)
	kinds := TaskKinds()
	tasks := make([]*task, n)
	for i := range n {
		k := KindNone
		if i < faulted {
			k = kinds[i%len(kinds)]
		}
		tasks[i] = &task{kind: k}
	}
	// The document kinds weigh more: each takes as many more tasks from
	// the unfaulted ones as a kind's share, and at least enough for 20 in
	// all (at N=1000 a share is 9; none more when every task is faulted).
	extra := []Kind{Document, DocumentAltered}
	per := max(faulted/len(kinds), 20-faulted/len(kinds))
	for j, i := 0, faulted; j < len(extra)*per && i < n; j, i = j+1, i+1 {
		tasks[i].kind = extra[j%len(extra)]
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x50a6))
	rng.Shuffle(n, func(a, b int) { tasks[a], tasks[b] = tasks[b], tasks[a] })
	count := map[Kind]int{}
	for i, t := range tasks {
		t.i = i
		t.key = fmt.Sprintf("soak-%d-%05d", seed, i)
		t.id = ledger.TaskID(scope, t.key)
		if t.kind == QuotaExceeded {
			t.id = ledger.TaskID(QuotaScope, t.key) // the dedicated quota caller
		}
		if isNotify(t.kind) {
			t.id = ledger.TaskID(NotifyScope, t.key) // the notified requester
		}
		t.input = fmt.Sprintf(`{"prompt":"soak task %d","max_tokens":8}`, i)
		if t.kind == LargeInput {
			t.input = fmt.Sprintf(`{"prompt":"soak task %d:%s","max_tokens":8}`, i, strings.Repeat(" a long document", 400))
		}
		count[t.kind]++
		if t.kind == AdmissionWait {
			// An output bound of its own (the n-th admission_wait task's:
			// admissionWaitMaxTokens + n, under the input cap for any N
			// below 250,000)
			// makes the call's admission estimate the task's alone:
			// fullWindows refuses its admit, and none of another task.
			t.input = fmt.Sprintf(`{"prompt":"soak task %d","max_tokens":%d}`, i, admissionWaitMaxTokens+count[t.kind])
		}
		t.racing = count[t.kind]%2 == 0
		if t.kind == KeyReusedPayload {
			t.other = fmt.Sprintf(`{"prompt":"another payload for soak task %d","max_tokens":8}`, i)
		}
		if isDeliver(t.kind) {
			t.input = deliverInput(t.kind, i)
		}
	}
	return withRegenerates(tasks, scope)
}

// providerScript is the simulated provider's script for a task kind.
func providerScript(k Kind, maxAttempts int) []simulated.Fault {
	switch k {
	case ProviderLoseReply:
		return []simulated.Fault{simulated.AcceptLoseReply}
	case Provider429:
		return []simulated.Fault{simulated.Throttle}
	case Provider5xx:
		return []simulated.Fault{simulated.ServerError, simulated.ServerError}
	case Provider4xx:
		// Permanent faults answer every attempt the same way (an attempt
		// whose outcome was not saved is retried).
		return repeat(simulated.BadRequest, maxAttempts+1)
	case ProviderCredential, NotifyParked:
		return repeat(simulated.Credentials, maxAttempts+1)
	case ProviderSlow:
		return []simulated.Fault{simulated.Slow}
	case ProviderExhaust:
		return repeat(simulated.ServerError, maxAttempts)
	case RetryLostReply:
		return []simulated.Fault{simulated.ServerError}
	case DeadlinePressure:
		return []simulated.Fault{simulated.Long}
	case BudgetTight:
		// A throttle (a definite refusal: charged nothing) and a 5xx
		// (charged its reservation: the model may have generated), so a
		// budget of 1.5 reservations parks and one of 2 completes.
		return []simulated.Fault{simulated.Throttle, simulated.ServerError}
	case CancelRunning:
		return []simulated.Fault{simulated.Slow}
	case ChainBudget:
		// A definite refusal: the root still completes within its chain's
		// budget, and the two regenerates race for what is left.
		return []simulated.Fault{simulated.Throttle}
	case OversizedResult:
		// Every attempt: the provider deterministically answers too much.
		return repeat(simulated.Oversized, maxAttempts+1)
	}
	return nil
}

func repeat(f simulated.Fault, n int) []simulated.Fault {
	out := make([]simulated.Fault, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// awsSteps are the scripted AWS faults of a task kind.
func awsSteps(t *task, seed int64) []faultinject.Step {
	switch t.kind {
	case DDBThrottle:
		// Which call is throttled is drawn per task: one of the submit's puts, the
		// worker's claim, or the second UpdateItem (a heartbeat or the
		// completion).
		switch u := faultinject.Draw(seed, "ddb_throttle", t.id); {
		case u < 1.0/6: // the watch item's
			return []faultinject.Step{{Service: "DynamoDB", Operation: "PutItem", N: 1, Kind: faultinject.Throttle}}
		case u < 1.0/3: // the task's, after its watch item
			return []faultinject.Step{{Service: "DynamoDB", Operation: "PutItem", N: 2, Kind: faultinject.Throttle}}
		case u < 2.0/3:
			return []faultinject.Step{{Service: "DynamoDB", Operation: "UpdateItem", N: 1, Kind: faultinject.Throttle}}
		default:
			return []faultinject.Step{{Service: "DynamoDB", Operation: "UpdateItem", N: 2, Kind: faultinject.Throttle}}
		}
	case DDBPutLostReply:
		// The submit's second PutItem: the task's own, after its watch item.
		return []faultinject.Step{{Service: "DynamoDB", Operation: "PutItem", N: 2, Kind: faultinject.LostReply}}
	case SQSSendFailure:
		return []faultinject.Step{{Service: "SQS", Operation: "SendMessage", N: 1, Kind: faultinject.SendFailure}}
	case SQSSendLostReply:
		return []faultinject.Step{{Service: "SQS", Operation: "SendMessage", N: 1, Kind: faultinject.LostReply}}
	}
	return nil
}
