package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	simdest "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Timing of the model. Time is the settable clock's: nothing sleeps on it.
// The lease is long in wall time (the worker's own heartbeat ticks every
// Lease/3 of wall time, far longer than a run), so renewals happen only
// when the model takes its heartbeat step.
const (
	lease       = 5 * time.Minute
	grace       = 5 * time.Second
	settle      = 30 * time.Second
	relaySlack  = 30 * time.Second
	callTimeout = 2 * lease // a call may outlive its lease, as deployed (docs/timing.md)
	maxAttempts = 3
	maxAge      = time.Hour
	dispatchTO  = time.Minute
	approvalTTL = 40 * time.Minute
	// shards per state in by_state: two keep a reconciler run to a few
	// queries (16 on a deployment; the walk is the same).
	shards = 2
)

// mode is the provider's (and the destination's) guarantee.
type mode string

const (
	modePlain    mode = "plain"          // neither idempotency nor readback
	modeReadback mode = "plain+readback" // readback by operation id, no idempotency
	modeIdem     mode = "idempotent"     // idempotency keys honoured, readback
)

// seq orders the events the checks compare (call starts and ends, lookups).
type seq struct{ n atomic.Int64 }

func (s *seq) next() int64 { return s.n.Add(1) }

// callRec is one call that reached the provider or the destination.
type callRec struct {
	task       string
	epoch      int
	start, end int64     // seq; end 0 while in flight
	began      time.Time // on the model's clock
	cut        bool      // held past the call timeout before it was sent: never reached the provider
	refused    bool      // a refusal in so many words: nothing was performed
	performed  bool      // the provider (destination) acted: a side effect
}

// lookupRec is one readback.
type lookupRec struct {
	task     string
	at       int64
	notFound bool
	failed   bool // no answer: the model held readback down
}

// ---- the invocation plan, carried on the worker's context ----

type planKey struct{}

// plan is what one worker invocation meets: a crash at a step boundary,
// a pause (the worker stops there until the model resumes it), the
// provider's answer, and a fault on one of its own writes.
type plan struct {
	n       int
	crash   string // "", "after_claim", "after_provider", "after_save"
	pause   string // "", "after_claim", "call_before", "call_after", "after_provider", "write_before", "write_after"
	pauseOp string // the write paused at (write_before/write_after): claim, mark, renew, complete, retry
	fault   string // the call's answer: "", "lose_reply", "server_error", "throttle", "bad_request"
	lostOp  string // the write whose reply is lost: claim, mark, complete, retry
	lostHow string // "timeout" (the caller sees a timeout) or "replay" (the SDK's retry meets the write)

	mu      sync.Mutex
	paused  bool
	lostHit bool
	arrived chan struct{} // closed when the worker reaches its pause
	release chan struct{} // closed by the model to let it go on
}

func planOf(ctx context.Context) *plan {
	p, _ := ctx.Value(planKey{}).(*plan)
	return p
}

// stop pauses the worker at point (op for a write) if the plan says so:
// once per invocation.
func (p *plan) stop(point, op string) {
	if p == nil || p.pause != point || p.pauseOp != op {
		return
	}
	p.mu.Lock()
	if p.paused {
		p.mu.Unlock()
		return
	}
	p.paused = true
	p.mu.Unlock()
	close(p.arrived)
	<-p.release
}

// takeLost reports once whether write op's reply is lost.
func (p *plan) takeLost(op string) bool {
	if p == nil || p.lostOp != op {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lostHit {
		return false
	}
	p.lostHit = true
	return true
}

// ---- the queue: the SQS event source, as the model drives it ----

// message is one SQS message in flight or waiting.
type message struct {
	id, body, task string
}

// queue stands in for the task queue: submit, the relay and operator
// retries send to it, and the model decides which message a worker gets
// when (SQS delivers at least once, in any order). Visibility changes are
// the model's to decide and are ignored.
type queue struct {
	mu   sync.Mutex
	n    int
	msgs []message
}

type dropSendKey struct{}

func (q *queue) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if ctx.Value(dropSendKey{}) != nil {
		return nil, &faultinject.InjectedError{Code: "ServiceUnavailable", Status: http.StatusServiceUnavailable}
	}
	m, err := dispatch.Parse(aws.ToString(in.MessageBody))
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n++
	id := fmt.Sprintf("m%d", q.n)
	q.msgs = append(q.msgs, message{id: id, body: aws.ToString(in.MessageBody), task: m.TaskID})
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

func (q *queue) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// take removes and returns message i.
func (q *queue) take(i int) message {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.msgs[i]
	q.msgs = append(q.msgs[:i:i], q.msgs[i+1:]...)
	return m
}

func (q *queue) put(m message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, m)
}

func (q *queue) has(task string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.msgs {
		if m.task == task {
			return true
		}
	}
	return false
}

// ---- the provider and the destination, recorded ----

// recorder keeps every call and lookup of the provider and the
// destination, and the epoch (operator retries) of its task at the start.
type recorder struct {
	seq     *seq
	epochOf func(task string) int

	mu      sync.Mutex
	calls   []*callRec
	lookups []lookupRec
}

func (r *recorder) begin(task string, now time.Time) (*callRec, time.Time) {
	c := &callRec{task: task, epoch: r.epochOf(task), start: r.seq.next(), began: now}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return c, now
}

func (r *recorder) end(c *callRec, refused, performed bool) {
	r.mu.Lock()
	c.end, c.refused, c.performed = r.seq.next(), refused, performed
	r.mu.Unlock()
}

// cut ends c, held before it was sent until past the call timeout: the
// worker's timeout would have ended it unsent.
func (r *recorder) cut(c *callRec) {
	r.mu.Lock()
	c.end, c.cut = r.seq.next(), true
	r.mu.Unlock()
}

func (r *recorder) lookup(task string, notFound bool) {
	r.mu.Lock()
	r.lookups = append(r.lookups, lookupRec{task: task, at: r.seq.next(), notFound: notFound})
	r.mu.Unlock()
}

func (r *recorder) lookupFailed(task string) {
	r.mu.Lock()
	r.lookups = append(r.lookups, lookupRec{task: task, at: r.seq.next(), failed: true})
	r.mu.Unlock()
}

// of returns copies of the calls and lookups of task.
func (r *recorder) of(task string) ([]callRec, []lookupRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cs []callRec
	for _, c := range r.calls {
		if c.task == task {
			cs = append(cs, *c)
		}
	}
	var ls []lookupRec
	for _, l := range r.lookups {
		if l.task == task {
			ls = append(ls, l)
		}
	}
	return cs, ls
}

// provider is the simulated provider behind the recorder and the plan's
// pauses and answers. It declares what the simulated one does.
type provider struct {
	sim  *simulated.Provider
	rec  *recorder
	now  func() time.Time
	down *atomic.Bool // readback unavailable: every Lookup fails
}

// errReadbackDown is a Lookup while the model holds readback down: no
// answer, neither found nor absent.
var errReadbackDown = errors.New("modeltest: readback unavailable")

// errCut is a call held by the model past its call timeout: the worker's
// timeout would have ended it, and the provider does not act after it.
var errCut = errors.New("modeltest: the call ran past its call timeout")

func (p *provider) Name() string                { return p.sim.Name() }
func (p *provider) Model() string               { return p.sim.Model() }
func (p *provider) CallTimeout() time.Duration  { return p.sim.CallTimeout() }
func (p *provider) HonoursIdempotencyKey() bool { return p.sim.HonoursIdempotencyKey() }
func (p *provider) OffersReadback() bool        { return p.sim.OffersReadback() }

func (p *provider) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	pl := planOf(ctx)
	if pl != nil {
		switch pl.fault {
		case "lose_reply":
			p.sim.Script(req.OperationID, simulated.AcceptLoseReply)
		case "server_error":
			p.sim.Script(req.OperationID, simulated.ServerError)
		case "throttle":
			p.sim.Script(req.OperationID, simulated.Throttle)
		case "bad_request":
			p.sim.Script(req.OperationID, simulated.BadRequest)
		}
	}
	c, began := p.rec.begin(req.OperationID, p.now())
	pl.stop("call_before", "")
	if p.now().Sub(began) > callTimeout {
		p.rec.cut(c)
		return contract.Result{}, retrypolicy.Uncertain(errCut)
	}
	before := p.sim.SideEffects(req.OperationID)
	res, err := p.sim.Generate(ctx, req)
	performed := p.sim.SideEffects(req.OperationID) > before
	var fe *simulated.FaultError
	refused := err != nil && (errors.Is(err, retrypolicy.ErrRequestNotSent) || (errors.As(err, &fe) && fe.Fault != simulated.AcceptLoseReply))
	// The call has ended at the provider: record it before a pause of the
	// worker that has its reply (call_after), whose outcome the checker
	// must not take for a call still in flight.
	p.rec.end(c, refused, performed)
	pl.stop("call_after", "")
	if err == nil && p.now().Sub(began) > callTimeout {
		return contract.Result{}, retrypolicy.Uncertain(errCut)
	}
	return res, err
}

func (p *provider) Lookup(ctx context.Context, op string) (contract.Result, error) {
	if p.down.Load() {
		p.rec.lookupFailed(op)
		return contract.Result{}, errReadbackDown
	}
	res, err := p.sim.Lookup(ctx, op)
	if !errors.Is(err, contract.ErrNoReadback) {
		p.rec.lookup(op, errors.Is(err, contract.ErrNotFound))
	}
	return res, err
}

// dest is a simulated destination behind the recorder and the plan.
type dest struct {
	sim  *simdest.Destination
	rec  *recorder
	now  func() time.Time
	down *atomic.Bool
}

func (d *dest) Name() string                             { return d.sim.Name() }
func (d *dest) Guarantees() destination.Guarantees       { return d.sim.Guarantees() }
func (d *dest) CheckParams(params json.RawMessage) error { return d.sim.CheckParams(params) }

func (d *dest) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	pl := planOf(ctx)
	if pl != nil {
		switch pl.fault {
		case "lose_reply":
			d.sim.Script(req.OperationID, simdest.AcceptLoseReply)
		case "server_error":
			d.sim.Script(req.OperationID, simdest.ServerError)
		case "throttle":
			d.sim.Script(req.OperationID, simdest.Throttle)
		case "bad_request":
			d.sim.Script(req.OperationID, simdest.Reject)
		}
	}
	c, began := d.rec.begin(req.OperationID, d.now())
	pl.stop("call_before", "")
	if d.now().Sub(began) > callTimeout {
		d.rec.cut(c)
		return destination.Receipt{}, retrypolicy.Uncertain(errCut)
	}
	before := d.sim.SideEffects(req.OperationID)
	rc, err := d.sim.Deliver(ctx, req)
	performed := d.sim.SideEffects(req.OperationID) > before
	var fe *simdest.FaultError
	refused := err != nil && (errors.Is(err, retrypolicy.ErrRequestNotSent) || (errors.As(err, &fe) && fe.Fault != simdest.AcceptLoseReply))
	d.rec.end(c, refused, performed) // ended at the destination (the provider's Generate says why first)
	pl.stop("call_after", "")
	if err == nil && d.now().Sub(began) > callTimeout {
		return destination.Receipt{}, retrypolicy.Uncertain(errCut)
	}
	return rc, err
}

func (d *dest) Lookup(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	if d.down.Load() {
		d.rec.lookupFailed(req.OperationID)
		return destination.Receipt{}, errReadbackDown
	}
	rc, err := d.sim.Lookup(ctx, req)
	if !errors.Is(err, destination.ErrNoReadback) {
		d.rec.lookup(req.OperationID, errors.Is(err, destination.ErrNotFound))
	}
	return rc, err
}

// ---- the worker's and the reconciler's writes ----

// writeOp names a task write by what its update sets: claim, mark (the
// call-start mark), renew, complete (a result), retry (retry_wait), or "".
func writeOp(in *dynamodb.UpdateItemInput) string {
	set := setAttrs(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames)
	switch {
	case set["result"] || set["result_ref"]:
		return "complete"
	case set["call_started_version"]:
		return "mark"
	case set["lease_owner"] && set["assignment_version"]:
		return "claim"
	case set["not_before"] && set["state"] && hasStringValue(in.ExpressionAttributeValues, string(ledger.StateRetryWait)):
		return "retry"
	case set["lease_until"] && !set["state"]:
		return "renew"
	}
	return ""
}

func hasStringValue(vals map[string]types.AttributeValue, want string) bool {
	for _, v := range vals {
		if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == want {
			return true
		}
	}
	return false
}

// setAttrs returns the attributes an update expression's SET clause
// assigns, through its expression names.
func setAttrs(expr string, names map[string]string) map[string]bool {
	out := map[string]bool{}
	upper := strings.ToUpper(expr)
	i := strings.Index(upper, "SET ")
	if i < 0 {
		return out
	}
	rest := expr[i+4:]
	end := len(rest)
	for _, kw := range []string{" REMOVE ", " ADD ", " DELETE "} {
		if j := strings.Index(strings.ToUpper(rest), kw); j >= 0 && j < end {
			end = j
		}
	}
	depth, from := 0, 0
	part := func(s string) {
		lhs, _, ok := strings.Cut(s, "=")
		if !ok {
			return
		}
		lhs = strings.TrimSpace(lhs)
		if n, ok := names[lhs]; ok {
			lhs = n
		}
		out[lhs] = true
	}
	body := rest[:end]
	for k, r := range body {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				part(body[from:k])
				from = k + 1
			}
		}
	}
	part(body[from:])
	return out
}

// savedTask returns the task whose result a successful write saved, or "".
func savedTask(params any) string {
	switch in := params.(type) {
	case *dynamodb.UpdateItemInput:
		s := setAttrs(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames)
		if s["result"] || s["result_ref"] {
			return faultinject.TaskIDOf(in)
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			if u := it.Update; u != nil {
				s := setAttrs(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames)
				if s["result"] || s["result_ref"] {
					if k, ok := u.Key["task_id"].(*types.AttributeValueMemberS); ok {
						return k.Value
					}
				}
			}
		}
	}
	return ""
}

// writes is SDK middleware on the worker's and the reconciler's DynamoDB
// client: it counts saved results, and applies the invocation plan's
// faults to the worker's writes — a lost reply (the write is applied, the
// caller sees a timeout, or the SDK's retry meets the applied write) and a
// slow write (paused before it is sent, so it lands after the model moved
// on, or after it was applied, so its answer comes late).
type writes struct {
	onSave func(task string)
}

func (w *writes) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("modeltestWrites", w.handle), middleware.After)
}

func (w *writes) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	pl := planOf(ctx)
	op := ""
	if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && pl != nil {
		op = writeOp(u)
	}
	pl.stop("write_before", op)
	send := func() (middleware.InitializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleInitialize(ctx, in)
		if err == nil {
			if id := savedTask(in.Parameters); id != "" {
				w.onSave(id)
			}
		}
		return out, md, err
	}
	out, md, err := send()
	if err == nil && op != "" && pl.takeLost(op) {
		c := faultinject.Call{Service: awsmiddleware.GetServiceID(ctx), Operation: awsmiddleware.GetOperationName(ctx), TaskID: faultinject.TaskIDOf(in.Parameters)}
		if pl.lostHow == "timeout" {
			pl.stop("write_after", op)
			return middleware.InitializeOutput{}, md, &faultinject.LostReplyError{Call: c}
		}
		out, md, err = send()
	}
	pl.stop("write_after", op)
	return out, md, err
}

// ---- one run's system ----

// system is one run: fresh tables, the real submit, worker, reconciler and
// operator handlers on them, the simulated provider and destination, the
// model's queue and clock.
type system struct {
	env   *testenv.Env
	names stack.Names
	mode  mode
	// retrySafe declares generation retry-safe (DESIGN §14): repeating it
	// costs only money, so only deliveries keep the effect rules.
	retrySafe bool
	clock     *testenv.Clock
	seq       seq

	clean  *ledger.Ledger // reads and the operator: no faults
	queue  *queue
	sender *dispatch.Sender
	sim    *simulated.Provider
	dst    *dest
	rec    *recorder
	// readbackDown fails every provider and destination Lookup.
	readbackDown atomic.Bool
	submit       *api.Handler
	work         *worker.Handler
	recon        *reconciler.Handler

	mu     sync.Mutex
	epochs map[string]int         // operator retries per task
	since  map[string]int64       // when the task's epoch began (seq)
	saves  map[string]map[int]int // saved results per task and epoch
	invoc  int
}

func (s *system) epochOf(task string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochs[task]
}

// newEpoch starts a new run of the task: an operator's retry, with a
// fresh budget, is a person's decision to call again.
func (s *system) newEpoch(task string) {
	at := s.seq.next()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochs[task]++
	s.since[task] = at
}

func (s *system) epochSince(task string) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epochs[task], s.since[task]
}

func (s *system) savesIn(task string, epoch int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves[task][epoch]
}

func (s *system) onSave(task string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saves[task] == nil {
		s.saves[task] = map[int]int{}
	}
	s.saves[task][s.epochs[task]]++
}

// newSystem creates fresh tables on env and wires the handlers to them.
func newSystem(ctx context.Context, env *testenv.Env, m mode, retrySafe bool, start time.Time, seed uint64) (*system, func(), error) {
	tpl := stack.MustLoadDefault()
	names, err := tpl.Create(ctx, env.DDB, env.SQS, testenv.UniquePrefix(), nil)
	if err != nil {
		return nil, nil, err
	}
	drop := func() {
		if env.Disposable() {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = tpl.Delete(cctx, env.DDB, env.SQS, names)
	}
	s := &system{env: env, names: names, mode: m, retrySafe: retrySafe, clock: testenv.NewClock(start), queue: &queue{},
		epochs: map[string]int{}, since: map[string]int64{}, saves: map[string]map[int]int{}}
	s.rec = &recorder{seq: &s.seq, epochOf: s.epochOf}
	lcfg := ledger.Config{TasksTable: names.TasksTable, ReviewTable: names.ReviewTable, WatchTable: names.WatchTable, Shards: shards, MaxAttempts: maxAttempts,
		MaxAge: maxAge, DispatchTimeout: dispatchTO, Now: s.clock.Now}
	if s.clean, err = ledger.New(env.DDB, lcfg); err != nil {
		drop()
		return nil, nil, err
	}
	w := &writes{onSave: s.onSave}
	faulty := env.AWS.Copy()
	faulty.APIOptions = append(append([]func(*middleware.Stack) error{}, env.AWS.APIOptions...), w.register)
	wled, err := ledger.New(awsclient.DynamoDB(faulty), lcfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	s.sim = simulated.New(simulated.Options{Clock: s.clock.Now, CallTimeout: callTimeout,
		NoIdempotency: m != modeIdem, NoReadback: m == modePlain})
	g := destination.Guarantees{Idempotent: m == modeIdem, Readback: destination.ReadbackNone}
	if m != modePlain {
		g.Readback, g.NotFoundCredible = destination.ReadbackByOperationID, true
	}
	sd, err := simdest.New(simdest.Notify, simdest.Options{Now: s.clock.Now, Guarantees: &g})
	if err != nil {
		drop()
		return nil, nil, err
	}
	s.dst = &dest{sim: sd, rec: s.rec, now: s.clock.Now, down: &s.readbackDown}
	var dd destination.Destination = s.dst
	if m == modePlain {
		dd = noLookup{s.dst}
	}
	dests, err := deliver.NewRegistry(dd)
	if err != nil {
		drop()
		return nil, nil, err
	}
	p := &provider{sim: s.sim, rec: s.rec, now: s.clock.Now, down: &s.readbackDown}
	// The backoff's jitter and the reconciler's first stream, drawn from
	// the run's seed: a failing run's steps replay to the same failure.
	rnd := &seeded{r: rand.New(rand.NewPCG(seed, 0))}
	s.sender = &dispatch.Sender{SQS: s.queue, QueueURL: "model-queue"}
	s.submit = &api.Handler{Ledger: s.clean, Dispatch: s.sender, Destinations: dests, Now: s.clock.Now}
	s.work = &worker.Handler{
		Ledger: wled, Provider: p, Destinations: dests, SQS: s.queue, QueueURL: "model-queue",
		Policy: retrypolicy.Policy{Base: time.Second, Cap: 10 * time.Second, MaxAttempts: maxAttempts, MaxAge: maxAge, Rand: rnd},
		Lease:  lease, Concurrency: 1, RetrySafeGeneration: retrySafe,
		Owner: func(ctx context.Context, msgID string) string {
			if pl := planOf(ctx); pl != nil {
				return fmt.Sprintf("w%d/%s", pl.n, msgID)
			}
			return "w/" + msgID
		},
		Hooks: &worker.Hooks{
			AfterClaim:    func(ctx context.Context, _ string) error { return planOf(ctx).at("after_claim") },
			AfterProvider: func(ctx context.Context, _ string) error { return planOf(ctx).at("after_provider") },
			AfterSave:     func(ctx context.Context, _ string) error { return planOf(ctx).at("after_save") },
		},
	}
	s.recon = &reconciler.Handler{Ledger: wled, Dispatch: s.sender, Provider: p, Destinations: dests,
		Grace: grace, Settle: settle, RelaySlack: relaySlack, Concurrency: 1, RetrySafeGeneration: retrySafe, Rand: rnd}
	return s, drop, nil
}

// noLookup hides the destination's readback (mode plain).
type noLookup struct{ d *dest }

func (n noLookup) Name() string                             { return n.d.Name() }
func (n noLookup) Guarantees() destination.Guarantees       { return n.d.Guarantees() }
func (n noLookup) CheckParams(params json.RawMessage) error { return n.d.CheckParams(params) }
func (n noLookup) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	return n.d.Deliver(ctx, req)
}

// errCrash is what a hook returns where the plan crashes the worker.
var errCrash = errors.New("modeltest: the worker dies here")

// at is a hook: pause or crash where the plan says.
func (p *plan) at(point string) error {
	if p == nil {
		return nil
	}
	if p.crash == point {
		return errCrash
	}
	p.stop(point, "")
	return nil
}

// handled is what became of one worker invocation.
type handled struct {
	resp events.SQSEventResponse
	err  error
}

// invoke runs the worker on message m under plan pl, in its own
// goroutine; the channel yields its answer.
func (s *system) invoke(m message, pl *plan) <-chan handled {
	s.mu.Lock()
	s.invoc++
	pl.n = s.invoc
	s.mu.Unlock()
	pl.arrived, pl.release = make(chan struct{}), make(chan struct{})
	ctx := context.WithValue(context.Background(), planKey{}, pl)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: m.id, ReceiptHandle: "rh-" + m.id, Body: m.body,
		EventSource: "aws:sqs", Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}}
	out := make(chan handled, 1)
	go func() {
		resp, err := s.work.Handle(ctx, ev)
		out <- handled{resp, err}
	}()
	return out
}

// requeued reports whether the worker asked for the message back.
func requeued(h handled, m message) bool {
	for _, f := range h.resp.BatchItemFailures {
		if f.ItemIdentifier == m.id {
			return true
		}
	}
	return false
}

// seeded is a random source shared by the handlers' goroutines (a paused
// worker's among them).
type seeded struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (s *seeded) IntN(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.IntN(n)
}

func (s *seeded) Int64N(n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Int64N(n)
}
