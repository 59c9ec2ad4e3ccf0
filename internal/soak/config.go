package soak

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/taskledger/taskledger/internal/faultinject"
)

// DefaultBackground are the default seeded-rate background faults: a few
// per thousand calls of the handlers' updates, reads, queries, transactions
// and sends. PutItem is left to the per-task plan (a failed PutPoison of a
// dead letter only comes back after the reconciler's 60 s receive
// visibility, which would stretch the drain).
var DefaultBackground = []faultinject.Rule{
	{Service: "DynamoDB", Operation: "UpdateItem", Kind: faultinject.Throttle, Rate: 0.003},
	{Service: "DynamoDB", Operation: "GetItem", Kind: faultinject.Throttle, Rate: 0.003},
	{Service: "DynamoDB", Operation: "Query", Kind: faultinject.Throttle, Rate: 0.002},
	{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faultinject.Throttle, Rate: 0.01},
	{Service: "SQS", Operation: "SendMessage", Kind: faultinject.SendFailure, Rate: 0.003},
	{Service: "SQS", Operation: "ChangeMessageVisibility", Kind: faultinject.SendFailure, Rate: 0.003},
	// The S3 claim-check: a failed put (submit: 503; worker: repeated) and
	// a throttled read (worker: the claim is given back).
	{Service: "S3", Operation: "PutObject", Kind: faultinject.SendFailure, Rate: 0.02},
	{Service: "S3", Operation: "GetObject", Kind: faultinject.Throttle, Rate: 0.02},
}

// Mode is how the simulated provider treats a repeated operation.
type Mode string

// Provider modes. A soak run uses one; `make soak` runs all three in
// sequence, each on a fresh stack.
const (
	// ModeIdempotent: the provider honours idempotency keys (a repeated
	// operation returns the recorded result) and reads back by operation id.
	ModeIdempotent Mode = "idempotent"
	// ModePlain: no idempotency, no readback — every call that reaches the
	// provider may be a new side effect, as with Bedrock.
	ModePlain Mode = "plain"
	// ModePlainReadback: no idempotency, but Lookup by operation id.
	ModePlainReadback Mode = "plain+readback"
)

// Modes returns the provider modes in report order.
func Modes() []Mode { return []Mode{ModeIdempotent, ModePlain, ModePlainReadback} }

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("soak: unknown provider mode %q (idempotent, plain, plain+readback)", s)
}

// Per-task AWS call budgets (DESIGN.md §9): SQS SendMessage and
// DynamoDB GetItem calls of the handlers per accepted task. They are
// averages over a mixed run and are checked from CallBudgetMinTasks
// accepted tasks on: a run of a few dozen tasks, each with a planned fault
// (the tests' runs), is all relay re-sends and duplicate deliveries, and
// its figures are printed but not judged.
const (
	MaxSendPerTask     = 1.2
	MaxGetPerTask      = 0.5
	CallBudgetMinTasks = 1000
)

// ItemLimit is DynamoDB's item size limit (400 KB).
const ItemLimit = 400 * 1024

// Config sets up a soak run. Zero fields take the defaults below.
type Config struct {
	// N is the number of tasks (default 2000).
	N int
	// Mode is the simulated provider's mode (default ModeIdempotent).
	Mode Mode
	// Seed makes the fault schedule reproducible (default 1).
	Seed int64
	// FaultShare is the share of tasks with a planned fault (default 0.5).
	FaultShare float64
	// Lease is the worker's lease (default 2 s).
	Lease time.Duration
	// Visibility is the task queue's visibility timeout, set on the queue
	// (default FunctionTimeout, the least AWS accepts for an event source
	// mapping: the template's 6× would slow every redelivery sixfold).
	Visibility time.Duration
	// ReconcileEvery is the reconciler's period (default 1 s).
	ReconcileEvery time.Duration
	// ReconcileBudget is one reconciler run's time budget (default 2 s: a
	// partial walk is resumed by the next run).
	ReconcileBudget time.Duration
	// MaxAge and MaxAttempts are the task budgets (default 60 s and 5).
	MaxAge      time.Duration
	MaxAttempts int
	// DispatchTimeout is the outbox deadline of a queued task (default 10 s).
	DispatchTimeout time.Duration
	// FunctionTimeout is the worker invocation's deadline (default
	// 4×Lease: room for a stale worker's pause to see its takeover), DeadlineMargin the worker's margin before it (default
	// Lease/4), CallTimeout the provider adapter's bound on one call
	// (default 2×Lease): a call admitted at the start of an invocation
	// fits it with its margin, one admitted late does not. The slow fault
	// (1.5×Lease: it needs heartbeats) fits CallTimeout.
	FunctionTimeout time.Duration
	DeadlineMargin  time.Duration
	CallTimeout     time.Duration
	// LongCall is how long a deadline_pressure call takes (default
	// 3/4 CallTimeout); its record reaches the worker in a late wave of its
	// invocation, with LongCall/2 + DeadlineMargin left.
	LongCall time.Duration
	// BacklogPause is how long the poller stops receiving in each backlog
	// window (default 1.5×DispatchTimeout); BacklogWindows is how many
	// windows open while tasks are submitted (default 1), BacklogEvery
	// apart (default 4×DispatchTimeout; the first opens one second into the
	// run). One window at 60 tasks/s backs up 900 tasks: more would drown a
	// 10,000-task run in the relay's re-sends before they could be counted.
	// NoBacklog disables the windows.
	BacklogPause   time.Duration
	BacklogWindows int
	BacklogEvery   time.Duration
	NoBacklog      bool
	// SubmitRate paces new tasks per second (default 60; negative: no pacing).
	SubmitRate float64
	// MaxQueued bounds the task queue's visible backlog outside backlog
	// windows (default 300, 5 s at the default rate; negative: no bound):
	// the submitters wait while the queue holds at least this many
	// messages. The soak checks correctness, not the test machine's
	// capacity: a machine that consumes slower than SubmitRate would
	// otherwise grow a queue whose wait, not any defect, spends every age
	// budget and decides the outcome. The backlog windows still back the
	// queue up past it on purpose.
	MaxQueued int
	// Submitters is the number of concurrent callers (default 8).
	Submitters int
	// Poison is the number of poison messages (default max(2, N/50)).
	Poison int
	// RaceShare is the share of ticks on which two reconcilers race
	// (default 0.85).
	RaceShare float64
	// Background are seeded-rate faults on any handler call
	// (default DefaultBackground; set NoBackground to disable).
	Background   []faultinject.Rule
	NoBackground bool
	// DrainTimeout bounds the wait for every task to be final after the
	// last submit (default MaxAge + 30 s).
	DrainTimeout time.Duration
	// Progress receives progress lines (nil: none).
	Progress io.Writer
	// Log receives the handlers' logs (nil: discard).
	Log *slog.Logger

	// Paced: Run measures the engine first (MeasurePace) and runs at
	// PacedTo's clock and rate (the command's default; tests set their own).
	Paced bool
	// Scale and Pace are set by PacedTo: the factor every duration above
	// was multiplied by (1: none) and the engine's measured pace.
	Scale float64
	Pace  Pace

	// beforeCheck, set by tests, tampers with the tables before the check.
	beforeCheck func(context.Context, *soak)
}

func (c Config) withDefaults() Config {
	if c.N <= 0 {
		c.N = 2000
	}
	if c.Mode == "" {
		c.Mode = ModeIdempotent
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.FaultShare <= 0 {
		c.FaultShare = 0.5
	}
	c.FaultShare = min(c.FaultShare, 1)
	if c.Lease <= 0 {
		c.Lease = 2 * time.Second
	}
	if c.FunctionTimeout <= 0 {
		c.FunctionTimeout = 4 * c.Lease
	}
	if c.Visibility <= 0 {
		c.Visibility = c.FunctionTimeout
	}
	c.Visibility = max(c.Visibility, time.Second)
	if c.ReconcileEvery <= 0 {
		c.ReconcileEvery = time.Second
	}
	if c.ReconcileBudget <= 0 {
		c.ReconcileBudget = 2 * time.Second
	}
	if c.MaxAge <= 0 {
		c.MaxAge = time.Minute
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.DispatchTimeout <= 0 {
		c.DispatchTimeout = 10 * time.Second
	}
	if c.DeadlineMargin <= 0 {
		c.DeadlineMargin = c.Lease / 4
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 2 * c.Lease
	}
	if c.LongCall <= 0 {
		c.LongCall = c.CallTimeout * 3 / 4
	}
	if c.BacklogPause <= 0 {
		c.BacklogPause = c.DispatchTimeout * 3 / 2
	}
	if c.BacklogWindows <= 0 {
		c.BacklogWindows = 1
	}
	if c.BacklogEvery <= 0 {
		c.BacklogEvery = 4 * c.DispatchTimeout
	}
	if c.SubmitRate == 0 {
		c.SubmitRate = 60
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = 300
	}
	if c.Submitters <= 0 {
		c.Submitters = 8
	}
	if c.Poison <= 0 {
		c.Poison = max(2, c.N/50)
	}
	if c.RaceShare <= 0 {
		c.RaceShare = 0.85
	}
	if c.Background == nil && !c.NoBackground {
		c.Background = DefaultBackground
	}
	if c.NoBackground {
		c.Background = nil
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = c.MaxAge + 30*time.Second
	}
	return c
}
