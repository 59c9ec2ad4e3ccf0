package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// LatencyResult is the latency line: submit → completed, less the
// provider's time, with per-call AWS latencies injected, against the
// critical-path floor.
type LatencyResult struct {
	Tasks   int
	Latency faultinject.Latency
	// Provider is the simulated provider's own latency per call (it is
	// subtracted, measured per task).
	Provider time.Duration
	// Overhead percentiles of (completed − submitted − provider time).
	P50, P90, Max time.Duration
	// Floor is the sum of the calls that must happen one after another:
	// PutItem, SendMessage, ReceiveMessage, claim UpdateItem, complete
	// UpdateItem.
	Floor time.Duration
}

// Ratio returns P50 / Floor.
func (l LatencyResult) Ratio() float64 {
	if l.Floor <= 0 {
		return 0
	}
	return float64(l.P50) / float64(l.Floor)
}

// CriticalPathFloor returns the floor under lat.
func CriticalPathFloor(lat faultinject.Latency) time.Duration {
	return 3*lat["DynamoDB"] + 2*lat["SQS"]
}

// timedProvider measures each Generate call per operation.
type timedProvider struct {
	contract.Provider
	mu    sync.Mutex
	spent map[string]time.Duration
}

func (p *timedProvider) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	start := time.Now()
	res, err := p.Provider.Generate(ctx, req)
	p.mu.Lock()
	p.spent[req.OperationID] += time.Since(start)
	p.mu.Unlock()
	return res, err
}

func (p *timedProvider) took(op string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spent[op]
}

// RunLatency submits tasks one at a time through the real path, every AWS
// call delayed by lat, and measures submit → completed (the worker's
// invocation returned) less the provider's time. The event source runs
// without its batching window (the template's 1 s window trades latency
// for fewer invocations; it is a setting, not a cost of the ledger).
func RunLatency(ctx context.Context, b *soak.Backend, tasks int, lat faultinject.Latency) (*LatencyResult, error) {
	g, err := newRigWith(ctx, b, "benchlatency", false, lat.Register)
	if err != nil {
		return nil, err
	}
	defer g.drop()
	lcfg := ledger.Config{TasksTable: g.env.Names.TasksTable, ReviewTable: g.env.Names.ReviewTable, WatchTable: g.env.Names.WatchTable}
	submitLedger, err := ledger.New(awsclient.DynamoDB(g.cfg["submit"]), lcfg)
	if err != nil {
		return nil, err
	}
	workLedger, err := ledger.New(awsclient.DynamoDB(g.cfg["worker"]), lcfg)
	if err != nil {
		return nil, err
	}
	const providerDelay = 50 * time.Millisecond
	prov := &timedProvider{Provider: simulated.New(simulated.Options{Seed: 1, Latency: providerDelay}), spent: map[string]time.Duration{}}
	submit := &api.Handler{Ledger: submitLedger, Dispatch: &dispatch.Sender{SQS: awsclient.SQS(g.cfg["submit"]), QueueURL: g.env.Names.TaskQueueURL}}
	work := &worker.Handler{
		Ledger: workLedger, Provider: prov, SQS: awsclient.SQS(g.cfg["worker"]), QueueURL: g.env.Names.TaskQueueURL,
		Policy: retrypolicy.Default(), Lease: worker.DefaultLease,
	}
	type finish struct {
		id string
		at time.Time
	}
	finished := make(chan finish, tasks*2)
	deliver := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := work.Handle(ctx, ev)
		at := time.Now()
		for _, rec := range ev.Records {
			if m, perr := dispatch.Parse(rec.Body); perr == nil {
				finished <- finish{m.TaskID, at}
			}
		}
		return resp, err
	}
	var over []time.Duration
	_, err = g.runConsumer(ctx, deliver, tasks, func(ctx context.Context, _ func(int) error) error {
		for i := range tasks {
			req := submitRequest("latency-"+strconv.Itoa(i), i)
			start := time.Now()
			resp, _ := submit.Handle(ctx, req)
			if resp.StatusCode != http.StatusAccepted {
				return fmt.Errorf("bench: latency submit %d answered %d: %.200s", i, resp.StatusCode, resp.Body)
			}
			var v struct {
				TaskID string `json:"task_id"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &v); err != nil || v.TaskID == "" {
				return fmt.Errorf("bench: latency submit %d: no task id in %.200s", i, resp.Body)
			}
			for {
				select {
				case f := <-finished:
					if f.id != v.TaskID {
						continue // a redelivery of an earlier task
					}
					over = append(over, f.at.Sub(start)-prov.took(v.TaskID))
				case <-time.After(time.Minute):
					return fmt.Errorf("bench: latency task %d not completed within a minute", i)
				case <-ctx.Done():
					return ctx.Err()
				}
				break
			}
		}
		return nil
	}, noBatchingWindow)
	if err != nil {
		return nil, err
	}
	sort.Slice(over, func(i, j int) bool { return over[i] < over[j] })
	return &LatencyResult{
		Tasks: len(over), Latency: lat, Provider: providerDelay, Floor: CriticalPathFloor(lat),
		P50: over[len(over)/2], P90: over[min(len(over)-1, len(over)*9/10)], Max: over[len(over)-1],
	}, nil
}
