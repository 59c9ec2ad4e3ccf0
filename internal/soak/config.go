package soak

import (
	"context"
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
}

// Config sets up a soak run. Zero fields take the defaults below.
type Config struct {
	// N is the number of tasks (default 2000).
	N int
	// Seed makes the fault schedule reproducible (default 1).
	Seed int64
	// FaultShare is the share of tasks with a planned fault (default 0.5).
	FaultShare float64
	// Lease is the worker's lease (default 2 s).
	Lease time.Duration
	// Visibility is the task queue's visibility timeout, set on the queue
	// (default 2×Lease; the template's 360 s compressed).
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
	// SubmitRate paces new tasks per second (default 60; negative: no pacing).
	SubmitRate float64
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

	// beforeCheck, set by tests, tampers with the tables before the check.
	beforeCheck func(context.Context, *soak)
}

func (c Config) withDefaults() Config {
	if c.N <= 0 {
		c.N = 2000
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
	if c.Visibility <= 0 {
		c.Visibility = 2 * c.Lease
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
	if c.SubmitRate == 0 {
		c.SubmitRate = 60
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
