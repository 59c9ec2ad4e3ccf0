package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Config sets up a bench run. Zero fields take the defaults.
type Config struct {
	// Tasks run through the full and the bare pipeline (default 1000).
	Tasks int
	// Callers submit concurrently in the full pipeline, and send
	// concurrently in the bare one (default 8).
	Callers int
	// LatencySubmits are timed one at a time (default 300).
	LatencySubmits int
	// History are the numbers of completed tasks the reconciler's read cost
	// is measured with (default 10 and 10,000).
	History []int
	// Live is the number of live (queued, not yet due) tasks next to the
	// history (default 10).
	Live int
	// SkipBuild skips the bootstrap builds.
	SkipBuild bool
	// Root is the module root the functions are built from (default: the
	// current module, from `go env GOMOD`).
	Root string
	// Progress receives progress lines (nil: none).
	Progress io.Writer
	// CostTasks are the tasks per workload and system of the cost
	// comparison (default 5); SkipCost skips it.
	CostTasks int
	SkipCost  bool
	// LatencyTasks are the tasks of the latency line (default 20), with
	// Latency injected per AWS call (default faultinject.DefaultLatency);
	// SkipLatency skips it.
	LatencyTasks int
	Latency      faultinject.Latency
	SkipLatency  bool
	// AdmissionTasks is the burst of the admission section (default 1000;
	// negative: skip it). See admission.go.
	AdmissionTasks int
}

func (c Config) withDefaults() Config {
	if c.Tasks <= 0 {
		c.Tasks = 1000
	}
	if c.Callers <= 0 {
		c.Callers = 8
	}
	if c.LatencySubmits <= 0 {
		c.LatencySubmits = 300
	}
	if len(c.History) == 0 {
		c.History = []int{10, 10000}
	}
	if c.Live <= 0 {
		c.Live = 10
	}
	if c.CostTasks <= 0 {
		c.CostTasks = 5
	}
	if c.LatencyTasks <= 0 {
		c.LatencyTasks = 20
	}
	if c.Latency == nil {
		c.Latency = faultinject.DefaultLatency()
	}
	if c.AdmissionTasks == 0 {
		c.AdmissionTasks = 1000
	}
	return c
}

// Result is what one bench run measured.
type Result struct {
	Backend string
	Tasks   int
	// Calls are the happy path's AWS calls of the full pipeline run.
	Calls []CallRow
	// Full and Bare are the two pipelines' runs.
	Full, Bare Throughput
	// Submit latency, one caller at a time.
	SubmitP50, SubmitP99, SubmitMax time.Duration
	LatencyN                        int
	Builds                          []BuildRow
	Reconciler                      []ReconRow
	// Cost is the cost comparison; Latency the latency line (nil when
	// skipped).
	Cost    *CostResult
	Latency *LatencyResult
	// Admission is the provider admission section (admission.go).
	Admission []AdmissionRow
}

// CallRow is one component's calls of one operation.
type CallRow struct {
	Component string // "submit", "worker", "event source"
	Op        string // "DynamoDB.PutItem"
	Calls     int
	Attempts  int // SDK attempts (retries included)
	PerTask   float64
	// Budget is the DESIGN §9 budget per task ("1", "0", "amortised").
	Budget string
	// Excess: more calls per task than the budget allows.
	Excess bool
}

// Throughput is one pipeline run.
type Throughput struct {
	Tasks   int
	Elapsed time.Duration
}

// PerSecond returns tasks per second.
func (t Throughput) PerSecond() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Tasks) / t.Elapsed.Seconds()
}

// budgets per component and operation, per task (DESIGN §9). Operations
// not listed have a budget of 0, except the event source's receive and
// delete, amortised by batches (at most one per task). The submit's two
// PutItems are the task and, before it, its watch item (pkg/ledger/watch.go:
// how the reconciler finds a task whose message was lost, in place of the
// by_state entry the task's put used to carry).
var budgets = map[string]map[string]float64{
	"submit": {"DynamoDB.PutItem": 2, "SQS.SendMessage": 1},
	"worker": {"DynamoDB.UpdateItem": 2},
}

// Run measures everything on backend b.
func Run(ctx context.Context, b *soak.Backend, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	r := &Result{Backend: b.Name, Tasks: cfg.Tasks}
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	say("bench: bare pipeline, %d tasks", cfg.Tasks)
	bare, err := bareRun(ctx, b, cfg)
	if err != nil {
		return nil, err
	}
	r.Bare = bare
	say("bench: full pipeline, %d tasks", cfg.Tasks)
	full, calls, err := fullRun(ctx, b, cfg)
	if err != nil {
		return nil, err
	}
	r.Full, r.Calls = full, calls
	say("bench: submit latency, %d submits", cfg.LatencySubmits)
	if err := latencyRun(ctx, b, cfg, r); err != nil {
		return nil, err
	}
	for _, h := range cfg.History {
		say("bench: reconciler reads with %d completed tasks", h)
		row, err := reconcilerRun(ctx, b, cfg, h)
		if err != nil {
			return nil, err
		}
		r.Reconciler = append(r.Reconciler, row)
	}
	if !cfg.SkipCost {
		cost, err := RunCost(ctx, b, cfg.CostTasks, say)
		if err != nil {
			return nil, fmt.Errorf("bench: cost: %w", err)
		}
		r.Cost = cost
	}
	if !cfg.SkipLatency {
		say("bench: latency line, %d tasks", cfg.LatencyTasks)
		lat, err := RunLatency(ctx, b, cfg.LatencyTasks, cfg.Latency)
		if err != nil {
			return nil, fmt.Errorf("bench: latency: %w", err)
		}
		r.Latency = lat
	}
	if cfg.AdmissionTasks > 0 {
		for _, sc := range DefaultAdmissionScenarios(cfg.AdmissionTasks) {
			say("bench: admission, %s, a burst of %d tasks", sc.Name, sc.Tasks)
			row, err := admissionRun(ctx, b, sc, cfg.Callers)
			if err != nil {
				return nil, err
			}
			r.Admission = append(r.Admission, row)
		}
	}
	if !cfg.SkipBuild {
		say("bench: building the bootstraps")
		r.Builds = buildAll(ctx, b, cfg)
	}
	return r, nil
}

// rig is one fresh stack with counted clients per component.
type rig struct {
	env     *soak.Env
	drop    func()
	counter map[string]*awsclient.Counter
	cfg     map[string]aws.Config
	prov    *simulated.Provider
	ledger  *ledger.Ledger
	submit  *api.Handler
	work    *worker.Handler
}

var components = []string{"submit", "worker", "event source"}

func newRig(ctx context.Context, b *soak.Backend, prefix string) (*rig, error) {
	env, drop, err := b.NewEnv(ctx, prefix)
	if err != nil {
		return nil, err
	}
	g := &rig{env: env, drop: drop, counter: map[string]*awsclient.Counter{}, cfg: map[string]aws.Config{}}
	for _, c := range components {
		g.counter[c] = awsclient.NewCounter()
		cc := b.AWS.Copy()
		cc.APIOptions = append(append([]func(*middleware.Stack) error{}, b.AWS.APIOptions...), g.counter[c].Register)
		g.cfg[c] = cc
	}
	lcfg := ledger.Config{TasksTable: env.Names.TasksTable, ReviewTable: env.Names.ReviewTable, WatchTable: env.Names.WatchTable}
	submitLedger, err := ledger.New(awsclient.DynamoDB(g.cfg["submit"]), lcfg)
	if err != nil {
		drop()
		return nil, err
	}
	workLedger, err := ledger.New(awsclient.DynamoDB(g.cfg["worker"]), lcfg)
	if err != nil {
		drop()
		return nil, err
	}
	g.ledger = workLedger
	g.prov = simulated.New(simulated.Options{Seed: 1})
	g.submit = &api.Handler{Ledger: submitLedger, Dispatch: &dispatch.Sender{SQS: awsclient.SQS(g.cfg["submit"]), QueueURL: env.Names.TaskQueueURL}}
	g.work = &worker.Handler{
		Ledger: workLedger, Provider: g.prov, SQS: awsclient.SQS(g.cfg["worker"]), QueueURL: env.Names.TaskQueueURL,
		Policy: retrypolicy.Default(), Lease: worker.DefaultLease,
	}
	return g, nil
}

// poller returns the template's event source mapping on the rig's queue,
// counting into the "event source" counter, calling deliver, and closing
// done once target records were deleted.
func (g *rig) poller(deliver local.SQSDeliver, target int, done chan<- struct{}) (*local.Poller, error) {
	tpl := stack.MustLoadDefault()
	var mapping *stack.EventSourceMapping
	for _, m := range tpl.SQSEvents() {
		if m.Function == "WorkerFunction" {
			mapping = &m
		}
	}
	if mapping == nil {
		return nil, fmt.Errorf("bench: template.yaml has no SQS event for WorkerFunction")
	}
	p := local.MappingPoller(*mapping, tpl.Functions()["WorkerFunction"])
	p.SQS = awsclient.SQS(g.cfg["event source"])
	p.QueueURL, p.QueueARN, p.Region = g.env.Names.TaskQueueURL, g.env.Names.TaskQueueARN, g.env.AWS.Region
	p.PollWait = local.EmbeddedPollWait
	p.Deliver = deliver
	var deleted atomic.Int64
	var once sync.Once
	p.OnBatch = func(r local.BatchReport) {
		if deleted.Add(int64(r.Deleted)) >= int64(target) {
			once.Do(func() { close(done) })
		}
	}
	return p, nil
}

// pipe runs produce (the callers) against a running poller and returns the
// time from the first call until target messages were deleted.
func pipe(ctx context.Context, p *local.Poller, done <-chan struct{}, produce func(context.Context) error) (time.Duration, error) {
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()
	start := time.Now()
	if err := produce(ctx); err != nil {
		return 0, err
	}
	select {
	case <-done:
		return time.Since(start), nil
	case <-time.After(10 * time.Minute):
		return 0, fmt.Errorf("bench: the pipeline did not drain within 10 minutes")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// parallel runs fn(i) for i in [0, n) on k goroutines; the first error wins.
func parallel(n, k int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func submitRequest(key string, i int) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: "/tasks",
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": key},
		Body:    `{"kind":"generate","input":{"prompt":"bench task ` + strconv.Itoa(i) + `","max_tokens":8}}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default",
			HTTP:  events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/tasks"},
		},
	}
}

// fullRun: callers submit through the API handler while the poller feeds
// the worker; done when every message was acknowledged and deleted.
func fullRun(ctx context.Context, b *soak.Backend, cfg Config) (Throughput, []CallRow, error) {
	g, err := newRig(ctx, b, "benchfull")
	if err != nil {
		return Throughput{}, nil, err
	}
	defer g.drop()
	done := make(chan struct{})
	p, err := g.poller(g.work.Handle, cfg.Tasks, done)
	if err != nil {
		return Throughput{}, nil, err
	}
	elapsed, err := pipe(ctx, p, done, func(ctx context.Context) error {
		return parallel(cfg.Tasks, cfg.Callers, func(i int) error {
			resp, _ := g.submit.Handle(ctx, submitRequest("bench-"+strconv.Itoa(i), i))
			if resp.StatusCode != http.StatusAccepted {
				return fmt.Errorf("bench: submit %d answered %d: %s", i, resp.StatusCode, resp.Body)
			}
			return nil
		})
	})
	if err != nil {
		return Throughput{}, nil, err
	}
	// Every task must be completed, or the counts describe something else.
	n, err := countCompleted(ctx, awsclient.DynamoDB(b.AWS), g.env.Names.TasksTable)
	if err != nil {
		return Throughput{}, nil, err
	}
	if n != cfg.Tasks {
		return Throughput{}, nil, fmt.Errorf("bench: %d of %d tasks completed after the full pipeline drained", n, cfg.Tasks)
	}
	return Throughput{Tasks: cfg.Tasks, Elapsed: elapsed}, callRows(g, cfg.Tasks), nil
}

func callRows(g *rig, tasks int) []CallRow {
	var rows []CallRow
	for _, c := range components {
		calls, attempts := g.counter[c].Calls(), g.counter[c].Attempts()
		ops := map[string]bool{}
		for op := range calls {
			ops[op] = true
		}
		for op := range budgets[c] {
			ops[op] = true
		}
		keys := make([]string, 0, len(ops))
		for op := range ops {
			keys = append(keys, op)
		}
		sort.Strings(keys)
		for _, op := range keys {
			row := CallRow{Component: c, Op: op, Calls: calls[op], Attempts: attempts[op], PerTask: float64(calls[op]) / float64(tasks)}
			switch {
			case c == "event source":
				row.Budget = "amortised"
				row.Excess = row.PerTask > 1
			default:
				budget := budgets[c][op]
				row.Budget = strconv.FormatFloat(budget, 'g', -1, 64)
				row.Excess = row.PerTask > budget+1e-9
			}
			rows = append(rows, row)
		}
	}
	return rows
}

func countCompleted(ctx context.Context, ddb *dynamodb.Client, table string) (int, error) {
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	n := 0
	for {
		out, err := ddb.Scan(ctx, in)
		if err != nil {
			return 0, err
		}
		for _, it := range out.Items {
			var t ledger.Task
			if err := attributevalue.UnmarshalMap(it, &t); err != nil {
				return 0, err
			}
			if t.State == ledger.StateCompleted {
				n++
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// bareRun: senders put task references on the queue; the same poller
// invokes a function that only calls the provider; done when all deleted.
func bareRun(ctx context.Context, b *soak.Backend, cfg Config) (Throughput, error) {
	g, err := newRig(ctx, b, "benchbare")
	if err != nil {
		return Throughput{}, err
	}
	defer g.drop()
	done := make(chan struct{})
	deliver := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for _, rec := range ev.Records {
			m, err := dispatch.Parse(rec.Body)
			if err == nil {
				_, err = g.prov.Generate(ctx, contract.Request{OperationID: m.TaskID, Attempt: 1, Kind: contract.KindGenerate,
					Input: []byte(`{"prompt":"bench","max_tokens":8}`)})
			}
			if err != nil {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			}
		}
		return resp, nil
	}
	p, err := g.poller(deliver, cfg.Tasks, done)
	if err != nil {
		return Throughput{}, err
	}
	sender := &dispatch.Sender{SQS: awsclient.SQS(g.cfg["submit"]), QueueURL: g.env.Names.TaskQueueURL}
	elapsed, err := pipe(ctx, p, done, func(ctx context.Context) error {
		return parallel(cfg.Tasks, cfg.Callers, func(i int) error {
			return sender.Send(ctx, ledger.TaskID("bench", strconv.Itoa(i)), "", 0)
		})
	})
	if err != nil {
		return Throughput{}, err
	}
	return Throughput{Tasks: cfg.Tasks, Elapsed: elapsed}, nil
}

// latencyRun times submits one at a time (no consumer running).
func latencyRun(ctx context.Context, b *soak.Backend, cfg Config, r *Result) error {
	g, err := newRig(ctx, b, "benchlat")
	if err != nil {
		return err
	}
	defer g.drop()
	lat := make([]time.Duration, 0, cfg.LatencySubmits)
	for i := range cfg.LatencySubmits {
		start := time.Now()
		resp, _ := g.submit.Handle(ctx, submitRequest("lat-"+strconv.Itoa(i), i))
		lat = append(lat, time.Since(start))
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("bench: submit answered %d: %s", resp.StatusCode, resp.Body)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r.LatencyN = len(lat)
	r.SubmitP50 = lat[len(lat)/2]
	r.SubmitP99 = lat[min(len(lat)-1, len(lat)*99/100)]
	r.SubmitMax = lat[len(lat)-1]
	return nil
}
