package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Defaults for Handler's zero fields.
const (
	DefaultBudget        = 40 * time.Second // the function's timeout is 60 s
	DefaultPageLimit     = 100
	DefaultMaxPerRun     = 1000
	DefaultGrace         = 5 * time.Second
	DefaultSettle        = 30 * time.Second
	DefaultRelaySlack    = 30 * time.Second
	DefaultConcurrency   = 8
	DefaultDLQBatches    = 10 // of up to 10 messages each
	DefaultLookupTimeout = 10 * time.Second
	// DefaultBacklogThreshold is one full receive round of the event
	// source mapping (BatchSize 10 × MaximumConcurrency 10): fewer visible
	// messages are a healthy pipeline's messages in transit, more are a
	// backlog.
	DefaultBacklogThreshold = 100
	// DefaultCallTimeout bounds a provider or destination call whose step
	// declares no call timeout (contract.CallTimer): the template's
	// PROVIDER_TIMEOUT. Until it has passed since a lease expired, a
	// readback's "not found" is not credible (the call may still run).
	DefaultCallTimeout = 2 * time.Minute
	// MaxOpenReviewPages bounds the open-review count (pages of 100).
	MaxOpenReviewPages = 10
)

// Backlog reports how many messages wait in the task queue;
// *dispatch.Backlog implements it.
type Backlog interface {
	Visible(ctx context.Context) (int, error)
}

// DLQ is the subset of the SQS client used to drain the dead-letter queue.
type DLQ interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Handler is the reconciler. Ledger and Dispatch are required; the rest is
// optional. A Handler is safe for concurrent use, and two Handlers (two
// Lambda invocations) may run over the same tables at once.
type Handler struct {
	Ledger   *ledger.Ledger
	Dispatch *dispatch.Sender
	// DLQ and DLQURL: the task dead-letter queue; the drain is skipped when
	// either is unset.
	DLQ    DLQ
	DLQURL string
	// Provider is read back (contract.Looker) for unknown outcomes; nil
	// means no readback is possible.
	Provider contract.Provider
	// Destinations read deliver tasks back (deliver.go); nil: a deliver
	// task in unknown is parked for a person.
	Destinations *deliver.Registry
	// Notify is who is notified of a park or of a completion from readback
	// (package followup; nil: nobody). A plan's deliveries are created with
	// a completion whatever it says.
	Notify *followup.Config
	// Metrics receives the EMF records; nil writes none.
	Metrics *metrics.Writer
	Log     *slog.Logger

	// Budget is the wall-clock time one run may spend (default 40 s, under
	// the function's 60 s timeout); a context deadline shortens it.
	Budget time.Duration
	// PageLimit is the page size of index queries (default 100).
	PageLimit int32
	// MaxPerRun caps the tasks examined per run (default 1000).
	MaxPerRun int
	// Grace is how long past lease_until a running task is left alone
	// (default 5 s): a heartbeat may be in flight.
	Grace time.Duration
	// Settle is how long a task stays unknown before it is read back
	// (default 30 s): a provider may still be finishing the call. An
	// expired lease past the task's age deadline is read back at once.
	Settle time.Duration
	// RelaySlack delays re-sending a retry_wait task past its not_before
	// (default 30 s): the worker's delayed message normally arrives itself.
	RelaySlack time.Duration
	// Concurrency bounds the tasks handled at once (default 8).
	Concurrency int
	// Rand picks the stream a run's walk starts at (nil: math/rand/v2's
	// global source); a test that replays a run's steps sets a seeded one.
	Rand interface{ IntN(n int) int }
	// DLQBatches bounds the dead-letter receives per run (default 10).
	DLQBatches int
	// LookupTimeout bounds one provider Lookup (default 10 s).
	LookupTimeout time.Duration
	// Backlog reports the task queue's visible backlog (optional; nil
	// never defers). While at least BacklogThreshold messages wait there,
	// the relay's first decision on a queued or retry_wait task is not to
	// re-send: its message is most likely among them, and a re-send would
	// only queue a duplicate behind the same backlog (each duplicate later
	// costs a failed claim). The dispatch deadline backs off by the ledger's
	// DispatchBackoffCap, or half the time left to the age deadline if that
	// is sooner (ledger.DeferDispatch; a retry's age deadline is taken
	// RelaySlack early); the next decision re-sends regardless, so a send
	// lost during a backlog that never drains is still made.
	Backlog Backlog
	// BacklogThreshold is the visible-message count from which the relay
	// defers (default DefaultBacklogThreshold).
	BacklogThreshold int
	// SideEffects reports whether re-running a step of this kind could
	// cause a second external side effect. Default: true unless Provider
	// honours idempotency keys (contract.IdempotencyHonouring).
	SideEffects func(kind string) bool
	// RetrySafeGeneration declares generation retry-safe (DESIGN §14):
	// repeating a generate task's call costs only money, so an uncertain
	// outcome (an expired lease, a lost reply, a cut call) is a bounded
	// retry and a cancel while running ends cancelled at once, its
	// reservation charged — never a park saying the provider may have
	// acted. Deliveries keep their destination's rules. The zero value
	// treats generation as an effect (GENERATION_EFFECT_CLASS=effect);
	// deployments default to retry-safe.
	RetrySafeGeneration bool
	// Payloads is the S3 claim-check store (DESIGN §12): a read-back
	// result above its inline threshold is put at
	// results/<task>/<created_ms>/<assignment_version> before
	// CompleteFromReadback, which saves the reference. nil keeps read-back
	// results inline.
	Payloads *payload.Store
	// Spend settles, after a park or a cancel of a running or unknown
	// attempt (or of a task whose crashed attempt was re-queued), what the
	// task's attempts still hold on its budget items and its caller's
	// daily quota (spend.Accountant.SettleAbandoned): nobody else would,
	// since the task never runs again under those reservations. nil
	// settles nothing (the holds stay counted: the safe side).
	Spend *spend.Accountant
}

// Summary is what one run did. It is also the Lambda's response.
type Summary struct {
	// Examined counts due tasks looked at: one GetItem each, except a
	// queued or retry_wait task within its budgets, whose re-send is
	// claimed straight from the index entry (see reconcileRef).
	Examined int `json:"examined"`
	// Requeued counts running/unknown tasks put back to queued (and sent).
	Requeued int `json:"requeued"`
	// Resent counts outbox re-sends of queued/retry_wait tasks.
	Resent int `json:"resent"`
	// RelayDeferred counts queued tasks whose re-send was held back
	// because the task queue had a backlog (their dispatch deadline
	// backed off without a send).
	RelayDeferred int `json:"relay_deferred"`
	// QueueBacklog is the visible backlog the relay saw (-1: not asked,
	// or the read failed).
	QueueBacklog int `json:"queue_backlog"`
	// ExpiredToUnknown counts running tasks with an expired lease moved to
	// unknown for readback.
	ExpiredToUnknown int `json:"expired_to_unknown"`
	// Parked counts tasks this run moved to needs_review.
	Parked int `json:"parked"`
	// Completed counts tasks completed from a provider readback.
	Completed int `json:"completed"`
	// Cancelled counts tasks cancelled while running that this run ended
	// cancelled (no call started, or a readback found nothing).
	Cancelled int `json:"cancelled"`
	// Readback outcomes of provider Lookups.
	ReadbackFound    int `json:"readback_found"`
	ReadbackNotFound int `json:"readback_not_found"`
	// ReadbackInFlight counts readbacks that found nothing while the
	// expired assignment's call could still be running: not trusted.
	ReadbackInFlight   int `json:"readback_in_flight"`
	ReadbackNoReadback int `json:"readback_no_readback"`
	ReadbackErrors     int `json:"readback_errors"`
	// Watched counts watch items read (pkg/ledger/watch.go), Adopted the
	// tasks among them put into by_state (still queued or running).
	Watched int `json:"watched"`
	Adopted int `json:"adopted"`
	// WatchPending counts the watch items not read yet when the run
	// ended: the submissions of about the last dispatch timeout, in no
	// LiveTasks count until adopted (some may have ended meanwhile).
	WatchPending int `json:"watch_pending"`
	// Raced counts tasks another actor moved first (a no-op here).
	Raced int `json:"raced"`
	// SendErrors counts SQS sends that failed; the task stays due and is
	// re-sent by a later run.
	SendErrors int `json:"send_errors"`
	// PoisonMessages counts dead-letter messages written as review items;
	// DeadLettersDeleted counts all dead-letter messages deleted.
	PoisonMessages     int `json:"poison_messages"`
	DeadLettersDeleted int `json:"dead_letters_deleted"`
	// Errors counts unexpected failures (AWS errors); each is logged.
	Errors int `json:"errors"`
	// Partial is true when the time budget or MaxPerRun stopped the walk;
	// what is left is still due and is handled by the next run.
	Partial bool `json:"partial"`
	// LiveTasks and OldestAgeSeconds are per live state (see the package
	// documentation for the age approximation). OpenReviews is a lower
	// bound when OpenReviewsTruncated.
	LiveTasks            map[ledger.State]int     `json:"live_tasks"`
	OldestAgeSeconds     map[ledger.State]float64 `json:"oldest_age_seconds"`
	OpenReviews          int                      `json:"open_reviews"`
	OpenReviewsTruncated bool                     `json:"open_reviews_truncated,omitempty"`
	DurationMs           int64                    `json:"duration_ms"`

	// OpenReviewsByReason splits OpenReviews by review reason.
	OpenReviewsByReason map[string]int `json:"open_reviews_by_reason,omitempty"`
}

// RunError reports that a run hit unexpected errors. The run still did
// everything else it could; Summary says what.
type RunError struct {
	Summary Summary
	First   error
}

func (e *RunError) Error() string {
	return fmt.Sprintf("reconciler: %d error(s) in this run; first: %v", e.Summary.Errors, e.First)
}

func (e *RunError) Unwrap() error { return e.First }

// Handle runs one reconciliation. ev is the EventBridge Scheduler payload
// (see events/scheduler-tick.json); any JSON is accepted and none of it
// steers the run. It returns a *RunError when something failed
// unexpectedly, so the invocation shows up in the function's Errors metric;
// retrying it is safe.
func (h *Handler) Handle(ctx context.Context, ev json.RawMessage) (Summary, error) {
	if h.Ledger == nil || h.Dispatch == nil {
		return Summary{}, errors.New("reconciler: Ledger and Dispatch are required")
	}
	r := h.newRun(ctx)
	log := r.log
	if sched := scheduleOf(ev); sched.Resource != "" || sched.Time != "" {
		log.InfoContext(ctx, "reconciler: run", "schedule", sched.Resource, "scheduled_time", sched.Time)
	}

	r.drainDLQ(ctx)
	r.watch(ctx)
	r.walk(ctx)
	r.sweep(ctx)
	r.measure(ctx)

	r.sum.DurationMs = time.Since(r.start).Milliseconds()
	r.emit()
	log.InfoContext(ctx, "reconciler: done",
		"examined", r.sum.Examined, "requeued", r.sum.Requeued, "resent", r.sum.Resent,
		"parked", r.sum.Parked, "completed", r.sum.Completed, "expired_to_unknown", r.sum.ExpiredToUnknown,
		"raced", r.sum.Raced, "poison", r.sum.PoisonMessages, "errors", r.sum.Errors,
		"partial", r.sum.Partial, "duration_ms", r.sum.DurationMs)
	if r.sum.Errors > 0 {
		return r.sum, &RunError{Summary: r.sum, First: r.firstErr}
	}
	return r.sum, nil
}

// HandleTask applies the rules to one task now, as a run that found it in
// the by_state index would: one consistent read; a task the walk's query
// would not return yet (due_at not under dueBefore for its state — a
// running task's due_at Grace past, an unknown task's Settle past, a
// queued task's dispatch deadline passed) is left alone, counted in Raced;
// else the rule of its state, which checks the rest (a lease more than
// Grace past, ...). The due_at filter matters where a rule trusts the
// query for it: an unknown task past its age budget is resolved at once by
// its rule, and a task cancelled while running is due only when the fenced
// worker has found itself fenced (adversarial review: HandleTask parked
// such a task while the worker could still end it cancelled). It neither drains the dead-letter queue nor measures
// or emits metrics, and is bounded by Budget like a run. The scheduled
// Handle finds every due task by itself; HandleTask is for a caller that
// knows which task is due and cannot wait for the walk to reach its
// stream (the soak's stale worker: its pause must see the takeover before
// its invocation ends, however long a loaded emulator takes to walk all
// streams). Safe alongside runs: every write is fenced as in Handle.
func (h *Handler) HandleTask(ctx context.Context, taskID string) (Summary, error) {
	if h.Ledger == nil || h.Dispatch == nil {
		return Summary{}, errors.New("reconciler: Ledger and Dispatch are required")
	}
	if taskID == "" {
		return Summary{}, errors.New("reconciler: HandleTask needs a task id")
	}
	r := h.newRun(ctx)
	r.reconcileIfDue(ctx, taskID)
	r.sum.DurationMs = time.Since(r.start).Milliseconds()
	if r.sum.Errors > 0 {
		return r.sum, &RunError{Summary: r.sum, First: r.firstErr}
	}
	return r.sum, nil
}

type schedule struct {
	Resource string
	Time     string
}

// scheduleOf extracts the schedule ARN and time from a Scheduler default
// notification, if ev is one; anything else yields zero values.
func scheduleOf(ev json.RawMessage) schedule {
	var n struct {
		Time      string   `json:"time"`
		Resources []string `json:"resources"`
	}
	if json.Unmarshal(ev, &n) != nil {
		return schedule{}
	}
	s := schedule{Time: n.Time}
	if len(n.Resources) > 0 {
		s.Resource = n.Resources[0]
	}
	return s
}

// run is the state of one Handle call.
type run struct {
	h   *Handler
	log *slog.Logger
	// now is the ledger clock at the start: the rules' notion of "due".
	now time.Time
	// start, workUntil and hardUntil are wall-clock: the time budget.
	start     time.Time
	workUntil time.Time
	hardUntil time.Time
	// watchUntil ends the watch phase (watch.go): half the work budget.
	watchUntil time.Time

	mu       sync.Mutex
	sum      Summary
	firstErr error
	// adopted are the tasks the watch adopted that were due, as the adopt
	// wrote them (its consistent answer: the walk applies their rules
	// without reading them again); walked, the tasks the walk handled
	// (watch.go, sweep).
	adopted map[string]*ledger.Task
	walked  map[string]bool

	// backlogOnce asks Backlog at most once per run, and only when a
	// queued or retry_wait task is due for a re-send.
	backlogOnce sync.Once
	backlog     int
}

func (h *Handler) newRun(ctx context.Context) *run {
	r := &run{h: h, log: h.Log, now: h.Ledger.Now().UTC(), start: time.Now(), walked: map[string]bool{}, adopted: map[string]*ledger.Task{}}
	if r.log == nil {
		r.log = logging.Discard()
	}
	budget := h.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	r.hardUntil = r.start.Add(budget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-2*time.Second).Before(r.hardUntil) {
		r.hardUntil = dl.Add(-2 * time.Second)
	}
	// Keep the last eighth of the budget for metrics.
	r.workUntil = r.hardUntil.Add(-r.hardUntil.Sub(r.start) / 8)
	r.sum.QueueBacklog = -1
	r.sum.LiveTasks = map[ledger.State]int{}
	r.sum.OldestAgeSeconds = map[ledger.State]float64{}
	return r
}

func (r *run) workLeft() bool { return time.Now().Before(r.workUntil) }
func (r *run) timeLeft() bool { return time.Now().Before(r.hardUntil) }

// count applies f to the summary under the lock.
func (r *run) count(f func(s *Summary)) {
	r.mu.Lock()
	f(&r.sum)
	r.mu.Unlock()
}

// fail records an unexpected error.
func (r *run) fail(ctx context.Context, msg string, err error, attrs ...any) {
	r.mu.Lock()
	r.sum.Errors++
	if r.firstErr == nil {
		r.firstErr = fmt.Errorf("%s: %w", msg, err)
	}
	r.mu.Unlock()
	r.log.ErrorContext(ctx, "reconciler: "+msg, append(attrs, "error", err.Error())...)
}

func (h *Handler) pageLimit() int32 {
	if h.PageLimit > 0 {
		return h.PageLimit
	}
	return DefaultPageLimit
}

func durOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func intOr(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// sideEffects reports whether re-running t's step could act twice.
func (h *Handler) sideEffects(t *ledger.Task) bool {
	if h.retrySafe(t) {
		return false // a repeat costs only money
	}
	if t.Kind == deliver.Kind {
		return !honours(h.step(t)) // the destination's guarantees decide
	}
	if h.SideEffects != nil {
		return h.SideEffects(t.Kind)
	}
	return !honours(h.Provider)
}

func honours(p contract.Provider) bool {
	ih, ok := p.(contract.IdempotencyHonouring)
	return ok && ih.HonoursIdempotencyKey()
}

// callMarked reports whether the worker marks a provider call's start
// (ledger.MarkCallStarted) before it: when the provider does not honour
// idempotency keys (the worker's rule).
func (h *Handler) callMarked(t *ledger.Task) bool {
	p := h.step(t)
	return p != nil && !honours(p) && !h.retrySafe(t)
}

// budgetReview is the budget_exhausted review of t (no attempt just ended),
// worded for its effect class.
func (h *Handler) budgetReview(t *ledger.Task, budget string) ledger.Review {
	return review.BudgetExhaustedAfterClass(t, budget, review.Failure{}, time.Time{}, h.retrySafe(t))
}

// retrySafe reports whether repeating t's call costs only money: a
// generation, when the deployment declares it retry-safe.
func (h *Handler) retrySafe(t *ledger.Task) bool {
	return h.RetrySafeGeneration && t.Kind != deliver.Kind
}

func (h *Handler) looker(t *ledger.Task) (contract.Looker, bool) {
	p := h.step(t)
	lk, ok := p.(contract.Looker)
	return lk, ok && p != nil
}

// Due reports whether a run at now would act on t: the walk's query
// returns it (due_at under dueBefore for its state) and, for a running
// task, its lease ended more than Grace ago (expiredLease's rule). A
// caller that reads a task with a client of its own asks this before
// HandleTask, which reads it again with the handler's (the soak's stale
// worker: its reads are not the run's).
func (h *Handler) Due(t *ledger.Task, now time.Time) bool {
	before, ok := h.dueBefore(now)[ledger.PartitionOf(t.State)]
	if !ok || t.DueAt >= before {
		return false
	}
	return t.State != ledger.StateRunning || t.LeaseUntil < now.Add(-durOr(h.Grace, DefaultGrace)).UnixMilli()
}

// dueBefore is, per by_state partition (ledger.Partitions), the due_at a
// task must be under for the walk to find it (its by_state query): what
// "due" means for every rule. Queued and running tasks share the active
// partition: a queued task is due at its dispatch deadline, a running one
// when its due_at (the deadline it was queued with, or the lease's grid
// once renewed) has passed and — its rule's own check — its lease ended
// more than Grace ago.
func (h *Handler) dueBefore(now time.Time) map[ledger.State]int64 {
	nowMs := now.UnixMilli()
	return map[ledger.State]int64{
		ledger.StateActive:    nowMs,
		ledger.StateUnknown:   nowMs - durOr(h.Settle, DefaultSettle).Milliseconds(),
		ledger.StateRetryWait: nowMs - durOr(h.RelaySlack, DefaultRelaySlack).Milliseconds(),
		// Awaiting approval: due_at is the approval deadline.
		ledger.StateAwaitingApproval: nowMs,
	}
}

// stream is one (partition, shard) pair of the by_state index.
type stream struct {
	state     ledger.State
	shard     int
	dueBefore int64
	cursor    string
	done      bool
}

// walk applies the rules to every due live task, round-robin over the
// streams, one page each per round, until all are exhausted, the work
// budget is spent or MaxPerRun tasks were examined.
func (r *run) walk(ctx context.Context) {
	h := r.h
	shards := h.Ledger.Config().Shards
	due := h.dueBefore(r.now)
	// Every (partition, shard) pair is a stream; the run starts at a random
	// one of all of them, so a run whose budget covers only a few queries
	// still reaches every partition over successive runs (rotating only the
	// shard would always read the first partition and could starve others).
	all := make([]*stream, 0, shards*len(ledger.Partitions))
	for shard := range shards {
		for _, st := range ledger.Partitions {
			all = append(all, &stream{state: st, shard: shard, dueBefore: due[st]})
		}
	}
	intN := rand.IntN
	if h.Rand != nil {
		intN = h.Rand.IntN
	}
	start := intN(len(all))
	streams := append(all[start:len(all):len(all)], all[:start]...)
	maxPerRun := intOr(h.MaxPerRun, DefaultMaxPerRun)
	sem := make(chan struct{}, intOr(h.Concurrency, DefaultConcurrency))
	var wg sync.WaitGroup
	defer wg.Wait()
	examined := 0
	for active := len(streams); active > 0; {
		active = 0
		for _, s := range streams {
			if s.done {
				continue
			}
			if ctx.Err() != nil || !r.workLeft() || examined >= maxPerRun {
				r.count(func(s *Summary) { s.Partial = true })
				return
			}
			refs, next, err := tasklist.QueryLive(ctx, h.Ledger, tasklist.LiveQuery{
				State: s.state, Shard: s.shard, DueBefore: s.dueBefore, Limit: h.pageLimit(), Cursor: s.cursor,
			})
			if err != nil {
				r.fail(ctx, "query by_state", err, "state", s.state, "shard", s.shard)
				s.done = true
				continue
			}
			s.cursor, s.done = next, next == ""
			if !s.done {
				active++
			}
			for _, ref := range refs {
				if examined >= maxPerRun {
					r.count(func(s *Summary) { s.Partial = true })
					s.done = true
					break
				}
				sem <- struct{}{}
				// A task waits here for a slot, possibly past the budget
				// (each one before it may hold a slot for a whole Lookup):
				// one not started by then is left due for the next run, so
				// the page ends within the budget and the metrics still run.
				if ctx.Err() != nil || !r.workLeft() {
					<-sem
					r.count(func(s *Summary) { s.Partial = true })
					break
				}
				examined++
				wg.Add(1)
				go func(ref tasklist.LiveRef) {
					defer wg.Done()
					defer func() { <-sem }()
					r.reconcileRef(ctx, ref)
				}(ref)
			}
			// Let this page finish before the next query of the same
			// stream, so a cursor never races the writes it pages over.
			wg.Wait()
		}
	}
}
