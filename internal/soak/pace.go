package soak

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Pace is what a backend sustains, measured on the run's own tasks table
// before the run: the latency of one conditional UpdateItem with nothing
// else in flight, and how many of them it completes per second with
// Writers in flight.
//
// The soak's clock is set from it (Config.PacedTo): a protocol whose lease
// is shorter than a write is not the protocol DESIGN.md describes, and an
// engine driven past its throughput answers in queueing time that grows
// without bound. moto_server serves DynamoDB from one Python thread, some
// two orders of magnitude below the embedded kumo; a DynamoDB write in AWS
// that stalls puts the worker in the same place, so the soak slows its
// clock rather than counting the engine's queue as the protocol's failure.
type Pace struct {
	Serial     time.Duration // p90 of one writer's UpdateItem
	Loaded     time.Duration // p90 of an UpdateItem with Writers in flight
	Query      time.Duration // median of one by_state Query (the reconciler's walk is made of them)
	Throughput float64       // UpdateItems per second with Writers in flight
	Writers    int
}

func (p Pace) String() string {
	return fmt.Sprintf("UpdateItem %s alone (p90), %s and %.0f/s with %d in flight; by_state Query %s (median)",
		p.Serial.Round(time.Microsecond), p.Loaded.Round(time.Microsecond), p.Throughput, p.Writers, p.Query.Round(time.Microsecond))
}

// Pacing constants. A reconciler walk queries every shard of every live
// state (ledger.DefaultShards × 5); the soak's reconcilers (two on most
// ticks) may use paceShare of the engine's time for it. A task costs about
// paceCallsPerTask calls on the engine (the report prints the real mix:
// UpdateItem ~8.6 per task on kumo, plus SQS, reads, queries and the
// reconciler's walks); the run may use paceShare of the engine's measured
// throughput. A lease spans at least paceLeaseWrites writes as the engine
// answers them busy: a claim, a mark, heartbeats and a save happen within
// one, and each may wait behind the run's other requests.
const (
	paceCallsPerTask = 20
	paceShare        = 0.4
	paceLeaseWrites  = 100
	paceMaxScale     = 20
)

// MeasurePace measures env's engine: serial UpdateItems, then writers
// concurrent ones, on scratch items of the tasks table (deleted after; their
// keys are not task ids, so nothing of the run can read them).
func MeasurePace(ctx context.Context, env *Env, writers int) (Pace, error) {
	ddb := awsclient.DynamoDB(env.AWS)
	table := env.Names.TasksTable
	write := func(key string, n int) (time.Duration, error) {
		start := time.Now()
		_, err := ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}},
			UpdateExpression:          aws.String("SET #n = :n"),
			ConditionExpression:       aws.String("attribute_not_exists(#n) OR #n < :n"),
			ExpressionAttributeNames:  map[string]string{"#n": "pace_n"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: fmt.Sprint(n)}},
		})
		return time.Since(start), err
	}
	defer func() {
		for w := range writers {
			_, _ = ddb.DeleteItem(context.WithoutCancel(ctx), &dynamodb.DeleteItemInput{
				TableName: aws.String(table),
				Key:       map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: fmt.Sprintf("pace-%d", w)}},
			})
		}
	}()
	const serialN, eachN = 30, 15
	var serial, queries, loaded []time.Duration
	for i := range serialN {
		d, err := write("pace-0", i+1)
		if err != nil {
			return Pace{}, fmt.Errorf("soak: measure the engine's pace: %w", err)
		}
		serial = append(serial, d)
	}
	l, err := ledger.New(ddb, ledger.Config{TasksTable: table, ReviewTable: env.Names.ReviewTable})
	if err != nil {
		return Pace{}, err
	}
	for i := range serialN {
		start := time.Now()
		if _, err := tasklist.CountLive(ctx, l, ledger.StateQueued, i%ledger.DefaultShards); err != nil {
			return Pace{}, fmt.Errorf("soak: measure the engine's pace: %w", err)
		}
		queries = append(queries, time.Since(start))
	}
	q := func(ds []time.Duration, num, den int) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)*num/den]
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for i := range eachN {
				d, err := write(fmt.Sprintf("pace-%d", w), serialN+i+1)
				mu.Lock()
				loaded = append(loaded, d)
				if err != nil {
					first = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return Pace{}, fmt.Errorf("soak: measure the engine's pace: %w", first)
	}
	return Pace{
		Serial:     q(serial, 9, 10),
		Query:      q(queries, 1, 2),
		Loaded:     q(loaded, 9, 10),
		Throughput: float64(writers*eachN) / time.Since(start).Seconds(),
		Writers:    writers,
	}, nil
}

// PacedTo returns c with its clock and rate set for an engine of pace p:
// every duration of the protocol (lease, worker and call timeouts, the
// reconciler's period and budget, the age budget, the outbox deadline, the
// backlog windows) multiplied by one scale, so that a lease spans
// paceLeaseWrites writes as the engine answers them busy (the slower of
// alone and with Writers in flight), and the submit rate and queue bound cut
// so that the run uses at most paceShare of the engine's throughput. The
// protocol exercised is the same one, on a slower clock. A fast engine
// (kumo) gets c unchanged. Fields set explicitly in c are scaled too: they
// are read as "at the default pace".
func (c Config) PacedTo(p Pace) Config {
	c = c.withDefaults()
	scale := 1.0
	// The lease must span paceLeaseWrites writes as the engine answers
	// them busy, not idle: an engine that serves one request at a time
	// (moto) answers a write in its queue's time.
	if w := max(p.Serial, p.Loaded); w > 0 {
		scale = max(1, float64(w*paceLeaseWrites)/float64(c.Lease))
	}
	if p.Query > 0 {
		walk := float64(p.Query) * float64(5*ledger.DefaultShards) * (1 + c.RaceShare)
		scale = max(scale, walk/paceShare/float64(c.ReconcileEvery))
	}
	scale = min(math.Ceil(scale), paceMaxScale)
	if scale > 1 {
		s := func(d *time.Duration) { *d = time.Duration(float64(*d) * scale) }
		for _, d := range []*time.Duration{&c.Lease, &c.FunctionTimeout, &c.Visibility, &c.ReconcileEvery, &c.ReconcileBudget,
			&c.MaxAge, &c.DispatchTimeout, &c.DeadlineMargin, &c.CallTimeout, &c.LongCall, &c.BacklogPause, &c.BacklogEvery, &c.DrainTimeout} {
			s(d)
		}
	}
	c.Scale = scale
	if p.Throughput > 0 && c.SubmitRate > 0 {
		if limit := p.Throughput * paceShare / paceCallsPerTask; limit < c.SubmitRate {
			c.SubmitRate = max(limit, 0.5)
			// The queue bound is a few seconds of submits at the new rate:
			// what the consumers cannot take stays with the submitters.
			if c.MaxQueued > 0 {
				c.MaxQueued = max(10, int(c.SubmitRate*5*scale))
			}
		}
	}
	c.Pace = p
	return c
}

// scaled is d on the run's clock: d multiplied by Scale (PacedTo), for the
// protocol's durations that are constants rather than fields of Config.
func (c Config) scaled(d time.Duration) time.Duration {
	if c.Scale <= 1 {
		return d
	}
	return time.Duration(float64(d) * c.Scale)
}
