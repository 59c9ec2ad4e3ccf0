package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Workload is one payload shape of the cost table.
type Workload struct {
	Name string
	// InputBytes is the prompt's size (the document's, for Document).
	InputBytes int
	// ResultBytes, when > 0, is the least size of the provider's result.
	ResultBytes int
	// Document: the input is an uploaded document, not an inline prompt.
	Document bool
}

// Workloads are the cost table's rows: the cost targets' input sizes and a large
// result.
var Workloads = []Workload{
	{Name: "100 B input", InputBytes: 100},
	{Name: "8 KB input", InputBytes: 8 << 10},
	{Name: "30 KB input", InputBytes: 30 << 10},
	{Name: "1 MB document", InputBytes: 1 << 20, Document: true},
	{Name: "100 KB result", InputBytes: 100, ResultBytes: 100 << 10},
}

// The systems compared.
const (
	SystemBefore   = "taskledger before claim-check"
	SystemAfter    = "taskledger after claim-check"
	SystemBaseline = "baseline SQS→Lambda + Powertools idempotency"
	SystemSFN      = "Step Functions Standard (generate→approve→deliver)"
)

// CostRow is what one system bills per task for one workload.
type CostRow struct {
	System   string
	Workload string
	// NA, when set, says why the row could not run ("n/a, exceeds item
	// limit"); the other fields are then zero.
	NA string
	// Tasks measured (0 for a derived row).
	Tasks int
	// Calls are AWS calls per task by "Service.Operation", every
	// component together (the event source's empty receives excluded).
	Calls map[string]float64
	// WRU and RRU are DynamoDB request units per task computed from item
	// sizes; Reported the capacity units the emulator returned per task,
	// over ReportedCalls of DynamoCalls calls.
	WRU, RRU float64
	// WatchRRU are the read units of RRU the reconciler's watch phase
	// bills per task (watchReads): its consistent read of the task and its
	// share of the watch Query.
	WatchRRU float64
	// IndexWRU are the write units of WRU billed in each global
	// secondary index (by_state, by_owner), per task.
	IndexWRU                   map[string]float64
	Reported                   float64
	ReportedCalls, DynamoCalls int
	// SQS are billed SQS requests per task (64 KB chunks).
	SQS float64
	// S3Put and S3Get are S3 requests per task by price tier.
	S3Put, S3Get float64
	// Invocations and GBSeconds are Lambda requests and billed GB-seconds
	// per task (provider and destination time excluded: the same in every
	// system).
	Invocations, GBSeconds float64
	// Transitions are Step Functions state transitions per task.
	Transitions float64
	// Derived: computed from the ASL walk and measured baseline units,
	// not run.
	Derived bool
	Note    string
}

// USDPerMillion returns the row's cost of a million tasks at p.
func (c CostRow) USDPerMillion(p Prices) float64 {
	if c.NA != "" {
		return 0
	}
	usd := c.WRU*p.WriteRequestUnit + c.RRU*p.ReadRequestUnit + c.SQS*p.SQSRequest +
		c.S3Put*p.S3Put + c.S3Get*p.S3Get +
		c.Invocations*p.LambdaRequest + c.GBSeconds*p.LambdaGBSecond +
		c.Transitions*p.StateTransition
	return usd * 1e6
}

// CallLatency is the per-call time the cost model charges Lambda duration
// for (and the latency line injects): the function is billed while it
// waits on its AWS calls.
var CallLatency = faultinject.DefaultLatency()

// costRig is a fresh stack with one counter and one meter per component.
type costRig struct {
	env     *soak.Env
	drop    func()
	counter map[string]*awsclient.Counter
	meter   map[string]*meter
	cfg     map[string]aws.Config
	memory  map[string]int // component → Lambda memory (MB), from the template
}

func newCostRig(ctx context.Context, b *soak.Backend, prefix string, extra ...func(*middleware.Stack) error) (*costRig, error) {
	return newRigWith(ctx, b, prefix, true, extra...)
}

// newRigWith builds a rig; metered adds the meters (which read items
// around every write: not for timing runs).
func newRigWith(ctx context.Context, b *soak.Backend, prefix string, metered bool, extra ...func(*middleware.Stack) error) (*costRig, error) {
	env, drop, err := b.NewEnv(ctx, prefix)
	if err != nil {
		return nil, err
	}
	probe := awsclient.DynamoDB(b.AWS)
	g := &costRig{env: env, drop: drop, counter: map[string]*awsclient.Counter{}, meter: map[string]*meter{}, cfg: map[string]aws.Config{}, memory: map[string]int{}}
	fns := stack.MustLoadDefault().Functions()
	g.memory["submit"] = fns["SubmitFunction"].MemorySize
	g.memory["worker"] = fns["WorkerFunction"].MemorySize
	for _, c := range components {
		g.counter[c], g.meter[c] = awsclient.NewCounter(), newMeter(probe)
		cc := b.AWS.Copy()
		opts := append([]func(*middleware.Stack) error{}, b.AWS.APIOptions...)
		opts = append(opts, g.counter[c].Register)
		if metered {
			opts = append(opts, g.meter[c].register)
		}
		cc.APIOptions = append(opts, extra...)
		g.cfg[c] = cc
	}
	return g, nil
}

// row sums the rig's components into a per-task CostRow. invocations are
// the worker (consumer) invocations; submits the producer's. It fails when
// a meter could not size one of the calls (meter.err): a row is never
// priced from a guess.
func (g *costRig) row(system, workload string, tasks int, submits, invocations int) (CostRow, error) {
	for _, c := range components {
		if err := g.meter[c].err(); err != nil {
			return CostRow{}, fmt.Errorf("%s, %s, %s: %w", system, workload, c, err)
		}
	}
	r := CostRow{System: system, Workload: workload, Tasks: tasks, Calls: map[string]float64{}}
	var u usage
	for _, c := range components {
		u.add(g.meter[c].usage())
		for op, n := range g.calls(c) {
			r.Calls[op] += float64(n)
		}
	}
	// Receives that returned messages: not the idle long polls, nor the
	// one the poller had in flight when the run stopped.
	if r.Calls["SQS.ReceiveMessage"] = float64(u.Receives); u.Receives == 0 {
		delete(r.Calls, "SQS.ReceiveMessage")
	}
	for op := range r.Calls {
		r.Calls[op] /= float64(tasks)
	}
	per := func(v float64) float64 { return v / float64(tasks) }
	r.WRU, r.RRU, r.Reported = per(u.WRU), per(u.RRU), per(u.Reported)
	for name, n := range u.IndexWRU {
		if r.IndexWRU == nil {
			r.IndexWRU = map[string]float64{}
		}
		r.IndexWRU[name] = per(n)
	}
	r.ReportedCalls, r.DynamoCalls = u.ReportedCalls, u.DynamoCalls
	r.SQS, r.S3Put, r.S3Get = per(u.SQSRequests), per(u.S3Put), per(u.S3Get)
	// Lambda: the producer (submit) and the consumer (worker) functions;
	// the event source is Lambda's poller, not billed as a function.
	for c, inv := range map[string]int{"submit": submits, "worker": invocations} {
		if inv == 0 {
			continue
		}
		ms := callTime(g.calls(c)) / float64(inv)
		r.Invocations += per(float64(inv))
		r.GBSeconds += per(float64(inv) * LambdaGBSeconds(ms, g.memory[c]))
	}
	return r, nil
}

// calls are component c's AWS calls by operation. A presigned URL goes
// through the SDK's middleware stack without a request, so the counter
// counts it as a PutObject: the meter recognises it and it is taken out.
func (g *costRig) calls(c string) map[string]int {
	calls := g.counter[c].Calls()
	if n := g.meter[c].usage().Presigns; n > 0 {
		if calls["S3.PutObject"] -= n; calls["S3.PutObject"] <= 0 {
			delete(calls, "S3.PutObject")
		}
	}
	return calls
}

// callTime is the modelled time, in ms, of calls at CallLatency.
func callTime(calls map[string]int) float64 {
	var ms float64
	for op, n := range calls {
		svc, _, _ := strings.Cut(op, ".")
		ms += float64(n) * float64(CallLatency[svc]) / float64(time.Millisecond)
	}
	return ms
}

// runConsumer runs the template's event source mapping on the rig's queue
// with deliver until target records were deleted, while produce runs. It
// returns the number of invocations.
//
// produce gets settled(n), which waits until n records were deleted: the
// cost runs submit one task at a time, each its own batch (no batching
// window), so every count is deterministic — the low-traffic worst case
// for receives, deletes and invocations, which batches of up to 10
// amortise under load.
func (g *costRig) runConsumer(ctx context.Context, deliver local.SQSDeliver, target int, produce func(ctx context.Context, settled func(n int) error) error, tune ...func(*local.Poller)) (int, error) {
	tpl := stack.MustLoadDefault()
	var mapping *stack.EventSourceMapping
	for _, m := range tpl.SQSEvents() {
		if m.Function == "WorkerFunction" {
			mapping = &m
		}
	}
	if mapping == nil {
		return 0, errors.New("bench: template.yaml has no SQS event for WorkerFunction")
	}
	p := local.MappingPoller(*mapping, tpl.Functions()["WorkerFunction"])
	p.SQS = awsclient.SQS(g.cfg["event source"])
	p.QueueURL, p.QueueARN, p.Region = g.env.Names.TaskQueueURL, g.env.Names.TaskQueueARN, g.env.AWS.Region
	p.PollWait = local.EmbeddedPollWait
	for _, f := range tune {
		f(p)
	}
	var invocations atomic.Int64
	p.Deliver = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		invocations.Add(1)
		return deliver(ctx, ev)
	}
	done := make(chan struct{})
	var once sync.Once
	deleted := newProgress("records settled")
	p.OnBatch = func(r local.BatchReport) {
		if deleted.add(r.Deleted) >= target {
			once.Do(func() { close(done) })
		}
	}
	settled := func(n int) error { return deleted.await(ctx, n) }
	if _, err := pipe(ctx, p, done, func(ctx context.Context) error { return produce(ctx, settled) }); err != nil {
		return 0, err
	}
	return int(invocations.Load()), nil
}

// prompt returns a generate input whose prompt is n bytes.
func prompt(n int, i int) string {
	tag := "bench cost task " + strconv.Itoa(i) + " "
	if n > len(tag) {
		tag += strings.Repeat("x", n-len(tag))
	}
	body, _ := json.Marshal(map[string]any{"prompt": tag[:max(n, 1)], "max_tokens": 8})
	return string(body)
}

// oversized scripts the simulated provider's Oversized fault (an output
// of at least Options.OversizeBytes) on every operation it sees.
type oversized struct{ *simulated.Provider }

func (o oversized) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	o.Script(req.OperationID, simulated.Oversized)
	return o.Provider.Generate(ctx, req)
}

func noBatchingWindow(p *local.Poller) { p.MaxBatchingWindow = 0 }

func workloadProvider(w Workload) contract.Provider {
	if w.ResultBytes > 0 {
		return oversized{simulated.New(simulated.Options{Seed: 1, OversizeBytes: w.ResultBytes})}
	}
	return simulated.New(simulated.Options{Seed: 1})
}

// taskledgerCost runs tasks of workload w one at a time through the real
// submit handler → SQS → the template's event source → worker path on the
// emulator and returns what they billed per task. claimCheck selects the
// claim-check ("after") configuration.
func taskledgerCost(ctx context.Context, b *soak.Backend, w Workload, tasks int, claimCheck bool) (CostRow, error) {
	return runTaskledger(ctx, b, w, tasks, tlRun{claimCheck: claimCheck})
}

// tlRun is how runTaskledger runs: the claim-check, and for the
// per-attempt extras (extras.go) another provider, lease and middleware.
type tlRun struct {
	claimCheck bool
	// provider, when set, replaces the workload's (workloadProvider).
	provider func(g *costRig) contract.Provider
	// lease, when > 0, is the worker's lease (heartbeats every lease/3).
	lease time.Duration
	// extra middleware on every component's clients (after the meters).
	extra []func(*middleware.Stack) error
	// system names the row (default SystemBefore / SystemAfter).
	system string
}

func runTaskledger(ctx context.Context, b *soak.Backend, w Workload, tasks int, o tlRun) (CostRow, error) {
	claimCheck := o.claimCheck
	system := SystemBefore
	if claimCheck {
		system = SystemAfter
	}
	if o.system != "" {
		system = o.system
	}
	if w.Document && !claimCheck {
		return CostRow{System: system, Workload: w.Name, NA: "n/a, exceeds item limit (a 1 MB document cannot be inline: 400 KB item, 32 KB input cap)"}, nil
	}
	g, err := newCostRig(ctx, b, "benchcost", o.extra...)
	if err != nil {
		return CostRow{}, err
	}
	defer g.drop()
	// The deployed submit path: a watch item, then the task (no by_state
	// entry until the reconciler adopts a task still live at its dispatch
	// deadline; pkg/ledger/watch.go).
	lcfg := ledger.Config{TasksTable: g.env.Names.TasksTable, ReviewTable: g.env.Names.ReviewTable, WatchTable: g.env.Names.WatchTable}
	if o.lease > 0 {
		// A deployment keeps the dispatch timeout near its lease (the
		// default is the default lease): a dispatch deadline more than a
		// lease past the claim's lease end costs every claim a renewal.
		lcfg.DispatchTimeout = o.lease
	}
	submitLedger, err := ledger.New(awsclient.DynamoDB(g.cfg["submit"]), lcfg)
	if err != nil {
		return CostRow{}, err
	}
	workLedger, err := ledger.New(awsclient.DynamoDB(g.cfg["worker"]), lcfg)
	if err != nil {
		return CostRow{}, err
	}
	submit := &api.Handler{Ledger: submitLedger, Dispatch: &dispatch.Sender{SQS: awsclient.SQS(g.cfg["submit"]), QueueURL: g.env.Names.TaskQueueURL}}
	work := &worker.Handler{
		Ledger: workLedger, Provider: workloadProvider(w), SQS: awsclient.SQS(g.cfg["worker"]), QueueURL: g.env.Names.TaskQueueURL,
		Policy: retrypolicy.Default(), Lease: worker.DefaultLease,
	}
	if o.provider != nil {
		work.Provider = o.provider(g)
	}
	if o.lease > 0 {
		work.Lease = o.lease
	}
	if claimCheck {
		// Each function's store on its own counted clients, on the
		// rig's payload bucket (nil above: everything inline).
		if submit.Payloads, err = payload.New(awsclient.S3(g.cfg["submit"]), g.env.Names.PayloadBucket, payload.Options{}); err != nil {
			return CostRow{}, err
		}
		if work.Payloads, err = payload.New(awsclient.S3(g.cfg["worker"]), g.env.Names.PayloadBucket, payload.Options{}); err != nil {
			return CostRow{}, err
		}
	}
	invocations, err := g.runConsumer(ctx, work.Handle, tasks, func(ctx context.Context, settled func(int) error) error {
		for i := range tasks {
			req := submitRequest("cost-"+strconv.Itoa(i), i)
			req.Body = `{"kind":"generate","input":` + prompt(w.InputBytes, i) + `}`
			if w.Document {
				body, err := uploadDocument(ctx, submit, w, i)
				if err != nil {
					return err
				}
				req.Body = body
			}
			resp, _ := submit.Handle(ctx, req)
			if resp.StatusCode != http.StatusAccepted {
				return fmt.Errorf("bench: %s submit %d answered %d: %.200s", w.Name, i, resp.StatusCode, resp.Body)
			}
			if err := settled(i + 1); err != nil {
				return err
			}
		}
		return nil
	}, noBatchingWindow)
	if err != nil {
		return CostRow{}, err
	}
	n, err := countCompleted(ctx, awsclient.DynamoDB(b.AWS), g.env.Names.TasksTable)
	if err != nil {
		return CostRow{}, err
	}
	if n != tasks {
		return CostRow{}, fmt.Errorf("bench: %s: %d of %d tasks completed", w.Name, n, tasks)
	}
	watch, err := watchReads(ctx, b, g, lcfg, tasks)
	if err != nil {
		return CostRow{}, fmt.Errorf("bench: %s: %w", w.Name, err)
	}
	submits := tasks
	if w.Document {
		if err := documentsRead(ctx, g, tasks); err != nil {
			return CostRow{}, err
		}
		// Two submit-function invocations per task (POST /uploads, POST
		// /tasks).
		submits = 2 * tasks
	}
	r, err := g.row(system, w.Name, tasks, submits, invocations)
	if err != nil {
		return CostRow{}, err
	}
	r.WatchRRU = watch
	r.RRU += watch
	if w.Document {
		// The client's PUT to the presigned URL: no SDK call of ours, but
		// an S3 PUT request billed to the bucket's owner.
		r.Calls[presignedPut]++
		r.S3Put++
		r.Note = "POST /uploads, the client's presigned PUT, the submit's Resolve + Adopt (CopyObject), the worker's GetObject"
	}
	return r, nil
}

// watchReads runs the reconciler once over the row's tasks, all completed,
// at a clock past their dispatch deadline (when their watch items come
// due), and returns the read units per task its watch phase bills: what
// the watch adds to a task's cost besides the submit's PutItem, which the
// submit's meter prices (1 write unit: a small item, a table without
// indexes).
//
// Priced per task: the task's consistent read in the BatchGetItem (each
// item billed on its own: one unit per started 4 KB, 1 for a small task),
// and the task's share of the consistent Query that returned its watch
// item: a Query bills the items it returns together, one unit per
// started 4 KB, so a run's Query over a shard's watch items that came due
// since the last run costs each its size over 4 KB (about 90 bytes: 0.02
// units). Not priced per task: what a run reads whatever was submitted
// (the cursor Query, one watch Query per shard at least one unit even
// when empty or rounded up, the by_state walk, the pending count), the
// reconciler's invocation and its cursor writes — per run, like the
// by_state reads of the design before the watch.
//
// It fails unless the run read every task's watch item once and adopted
// none (they ended before their deadline): the price is of that path.
func watchReads(ctx context.Context, b *soak.Backend, g *costRig, lcfg ledger.Config, tasks int) (float64, error) {
	wr := &watchMeter{watchTable: lcfg.WatchTable}
	cc := b.AWS.Copy()
	cc.APIOptions = append(append([]func(*middleware.Stack) error{}, b.AWS.APIOptions...), wr.register)
	timeout := lcfg.DispatchTimeout
	if timeout <= 0 {
		timeout = ledger.DefaultDispatchTimeout
	}
	rcfg := lcfg
	rcfg.Now = func() time.Time { return time.Now().Add(timeout + time.Minute) }
	led, err := ledger.New(awsclient.DynamoDB(cc), rcfg)
	if err != nil {
		return 0, err
	}
	h := &reconciler.Handler{Ledger: led, Dispatch: &dispatch.Sender{SQS: awsclient.SQS(cc), QueueURL: g.env.Names.TaskQueueURL}}
	sum, err := h.Handle(ctx, []byte(`{}`))
	if err != nil {
		return 0, fmt.Errorf("reconciler run over the watch: %w", err)
	}
	if sum.Watched != tasks || sum.Adopted != 0 || wr.items != tasks {
		return 0, fmt.Errorf("the reconciler read %d watch items (its watch Queries returned %d) and adopted %d tasks; want each of the %d completed tasks' items read once and none adopted",
			sum.Watched, wr.items, sum.Adopted, tasks)
	}
	return (wr.batchRRU + float64(wr.bytes)/readUnitBytes) / float64(tasks), nil
}

// watchMeter is SDK middleware on the reconciler's client adding up what
// its watch phase reads: the items its watch Queries return (their bytes)
// and the read units of its consistent BatchGetItems of tasks.
type watchMeter struct {
	watchTable string

	mu       sync.Mutex
	items    int
	bytes    int
	batchRRU float64
}

func (m *watchMeter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benchWatchReads",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil {
				return out, md, err
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			switch p := in.Parameters.(type) {
			case *dynamodb.QueryInput:
				pk, _ := p.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS)
				o, _ := out.Result.(*dynamodb.QueryOutput)
				if aws.ToString(p.TableName) != m.watchTable || pk == nil || !strings.HasPrefix(pk.Value, ledger.WatchPrefix) || p.Select == types.SelectCount || o == nil {
					break // the cursors, the pending count, the by_state walk
				}
				for _, it := range o.Items {
					m.items++
					m.bytes += itemsize.Item(it)
				}
			case *dynamodb.BatchGetItemInput:
				o, _ := out.Result.(*dynamodb.BatchGetItemOutput)
				if o == nil {
					break
				}
				for table, ka := range p.RequestItems {
					for _, it := range o.Responses[table] {
						m.batchRRU += ReadUnits(itemsize.Item(it), aws.ToBool(ka.ConsistentRead), false)
					}
				}
			}
			return out, md, err
		}), middleware.After)
}

// presignedPut names the client's PUT of a document to its presigned URL
// in a row's calls (not an SDK call: counted by the bench).
const presignedPut = "S3.PutObject (presigned, by the client)"

// documentBytes returns the 1 MB text document of cost task i (its own
// bytes per task: inputs/ is content-addressed).
func documentBytes(w Workload, i int) []byte {
	head := []byte("bench cost document " + strconv.Itoa(i) + "\n")
	return append(head, bytes.Repeat([]byte("x"), w.InputBytes-len(head))...)
}

// uploadDocument declares task i's document through the submit handler
// (POST /uploads), PUTs it to the presigned URL over HTTP as a client
// does, and returns the submit body naming it.
func uploadDocument(ctx context.Context, submit *api.Handler, w Workload, i int) (string, error) {
	doc := documentBytes(w, i)
	p, err := soak.PresignDocument(ctx, submit, "", soak.DocumentType, doc)
	if err != nil {
		return "", err
	}
	if p.Status != http.StatusCreated {
		return "", fmt.Errorf("bench: %s: POST /uploads %d answered %d (%s)", w.Name, i, p.Status, p.Problem)
	}
	if err := soak.PutDocument(ctx, p.View, doc); err != nil {
		return "", err
	}
	return soak.DocumentSubmit(prompt(100, i), p.View.UploadID), nil
}

// documentsRead checks that every completed task references its document
// and that the simulated provider's reply names the document's SHA-256 and
// size (the worker handed it the exact bytes), so the row prices a task
// that really read its document.
func documentsRead(ctx context.Context, g *costRig, tasks int) error {
	out, err := awsclient.DynamoDB(g.env.AWS).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(g.env.Names.TasksTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	var all []ledger.Task
	if err := attributevalue.UnmarshalListOfMaps(out.Items, &all); err != nil {
		return err
	}
	read := 0
	for _, t := range all {
		if !strings.HasPrefix(t.TaskID, "t_") || len(t.Documents) != 1 {
			continue
		}
		d := t.Documents[0].Ref
		if t.State == ledger.StateCompleted && strings.Contains(t.Result, "sha256:"+d.SHA256+" bytes:"+strconv.FormatInt(d.Size, 10)) {
			read++
		}
	}
	if read != tasks {
		return fmt.Errorf("bench: %d of %d document tasks completed with a reply naming their document's sha256 and size", read, tasks)
	}
	return nil
}

// hashKey is the Powertools-style idempotency key: a hash of the payload.
func hashKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// sortedOps returns the operations of rows, sorted.
func sortedOps(rows []CostRow) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for op := range r.Calls {
			seen[op] = true
		}
	}
	ops := make([]string, 0, len(seen))
	for op := range seen {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}
