package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Scope is the caller scope of every soak submit (no authorizer).
const Scope = api.Anonymous

// Logical ids of template.yaml the soak wires.
const (
	workerFunction = "WorkerFunction"
	taskQueue      = "TaskQueue"
)

// reconcileSettle is the reconcilers' Settle (compressed from 30 s).
const reconcileSettle = time.Second

// soak is one run.
type soak struct {
	cfg   Config
	env   *Env
	log   *slog.Logger
	tasks []*task
	byID  map[string]*task
	start time.Time

	counter *awsclient.Counter // the handlers' calls (faulty clients)
	lat     latencies
	inj     *faultinject.Injector
	plan    *faultinject.Plan
	prov    *simulated.Provider
	dests   *deliver.Registry // the simulated destinations of deliver tasks (plan_deliver.go)
	clean   *ledger.Ledger    // no faults: hooks and checker
	cleanDB *dynamodb.Client
	cleanQ  *sqs.Client
	// payloads reads the S3 claim-check bucket without faults (the
	// checker); nil when the Env has no payload bucket.
	payloads *payload.Store

	submit     *api.Handler
	work       *worker.Handler
	reconciles [2]*reconciler.Handler

	mu        sync.Mutex
	injected  map[Kind]int
	notes     map[Kind][]string
	fired     map[string]bool // kind|task: a one-shot fault already fired
	saves     map[string]int  // successful writes of a result, per task
	fencedSav map[string]int  // result writes rejected by their condition
	maybeSav  map[string]int  // result writes that got no answer (they may have been applied)
	records   map[string]*record
	poison    []poisonMsg
	recon     reconStats
	batches   batchStats
	provCalls int
	// kindCalls and kindEffects total the destinations' calls and side
	// effects per deliver kind (counted by the checker, for the report).
	kindCalls, kindEffects map[Kind]int
	ticks                  int
	staleTakeovers         int                   // stale workers' tasks moved on by the pause's own HandleTask (the rest by a scheduled run)
	runs                   []tickSpan            // every reconciler tick's start and end, in start order
	sp                     spendState            // budgets, quota, admission, cancel while running (spend.go)
	docs                   map[string]*docRecord // the document kinds' uploads, per task (document.go)
	docReplayer            *api.Handler          // the document callers' repeats, on clients of their own counter
	docReplayCalls         *awsclient.Counter

	replay         *faultinject.Replayer
	gate           *gate
	backlogWindows int
	queueWaits     int                     // polls on which the submitters waited for the queue (MaxQueued)
	cut            map[string]int          // provider calls cut short by the invocation's deadline, per task
	expired        map[string]*ledger.Task // ttl_expired: the task as it was when expires_at was moved into the past
	discarded      map[string][]int64      // versions whose worker logged its result as discarded, per task
	retryPending   map[string]bool         // tasks whose schedule-retry write was replayed (the first send applied it)
	retryDropped   map[string]int          // "retry rejected" reports of such a write: the record was acknowledged, no message left for the retry
	wf             workflow                // the approvers of workflow tasks (approval.go)
	decider        *api.Handler            // the API handler the approvers call, on clients of its own counter
	deciderCalls   *awsclient.Counter
	fu             fuState          // the follow-up kinds' lambda and email destinations (followup.go)
	notify         *followup.Config // the handlers' notifications
	hub            *streamHub       // the stream kinds' connections (stream.go)
}

type reconStats struct {
	Runs, Errors, Partial, Raced, Requeued, Resent, Parked, Completed, ExpiredToUnknown, Poison int
}

type batchStats struct {
	Batches, Records, ItemFailures, Deleted, Failed int
}

type poisonMsg struct {
	id    string
	queue string // "task" or "dlq"
}

// Run performs one soak on env and returns its report. An error means the
// run could not be carried out; broken invariants are in the report.
func Run(ctx context.Context, env *Env, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if cfg.Paced {
		p, err := MeasurePace(ctx, env, cfg.Submitters)
		if err != nil {
			return nil, err
		}
		cfg = cfg.PacedTo(p)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "soak: engine pace on %s: %s; clock scale %.0f×, submit rate %.1f/s\n", env.Backend, p, cfg.Scale, cfg.SubmitRate)
		}
	}
	s := &soak{
		cfg: cfg, env: env, log: cfg.Log,
		byID:     map[string]*task{},
		injected: map[Kind]int{}, notes: map[Kind][]string{}, fired: map[string]bool{},
		saves: map[string]int{}, fencedSav: map[string]int{}, maybeSav: map[string]int{}, records: map[string]*record{},
		gate: newGate(), cut: map[string]int{}, expired: map[string]*ledger.Task{},
		discarded: map[string][]int64{}, retryPending: map[string]bool{}, retryDropped: map[string]int{},
		kindCalls: map[Kind]int{}, kindEffects: map[Kind]int{}, docs: map[string]*docRecord{},
	}
	if s.log == nil {
		s.log = logging.Discard()
	}
	s.log = slog.New(&watchLog{inner: s.log.Handler(), seen: s.onWatched})
	s.tasks = plan(cfg.N, cfg.FaultShare, cfg.Seed, Scope)
	for _, t := range s.tasks {
		s.byID[t.id] = t
		s.records[t.id] = &record{}
	}
	if err := s.wire(ctx); err != nil {
		return nil, err
	}

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	poller, ticker, err := s.eventSources()
	if err != nil {
		stop()
		return nil, err
	}
	var bg sync.WaitGroup
	bg.Go(func() { _ = poller.Run(runCtx) })
	bg.Go(func() { _ = ticker.Run(runCtx) })

	s.start = time.Now()
	s.progress("soak: %d tasks on %s, provider %s, seed %d, %.0f%% faulted, lease %s, worker timeout %s, call timeout %s, reconciler every %s, max age %s",
		cfg.N, env.Backend, cfg.Mode, cfg.Seed, 100*cfg.FaultShare, cfg.Lease, cfg.FunctionTimeout, cfg.CallTimeout, cfg.ReconcileEvery, cfg.MaxAge)
	submitted := make(chan struct{})
	bg.Go(func() { s.backlog(runCtx, submitted) })
	s.submitAll(ctx)
	close(submitted)
	s.progress("soak: all submitted after %s (%d queue-depth waits of 200ms, queue bound %d); draining", time.Since(s.start).Round(time.Millisecond), s.queueWaits, s.cfg.MaxQueued)
	s.waitApprovers()
	drained := s.drain(ctx)
	if drained {
		s.expireAndResubmit(ctx)
		s.progress("soak: %d expired tasks resubmitted after %s; draining", len(s.expired), time.Since(s.start).Round(time.Millisecond))
		drained = s.drain(ctx)
	}
	stop()
	bg.Wait()
	elapsed := time.Since(s.start)
	if cfg.beforeCheck != nil {
		cfg.beforeCheck(ctx, s)
	}
	s.progress("soak: event sources stopped after %s (drained: %t); checking", elapsed.Round(time.Millisecond), drained)
	return s.check(ctx, elapsed)
}

func (s *soak) progress(format string, args ...any) {
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, format+"\n", args...)
	}
}

// wire builds the clients, the provider and the three handlers.
func (s *soak) wire(ctx context.Context) error {
	cfg, env := s.cfg, s.env
	s.cleanDB = awsclient.DynamoDB(env.AWS)
	s.cleanQ = awsclient.SQS(env.AWS)
	// The template's 360 s visibility, compressed with the lease.
	secs := int((cfg.Visibility + time.Second - 1) / time.Second)
	if _, err := s.cleanQ.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(env.Names.TaskQueueURL),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(secs)},
	}); err != nil {
		return fmt.Errorf("soak: set the task queue's visibility timeout: %w", err)
	}

	s.prov = simulated.New(simulated.Options{
		Seed:               cfg.Seed,
		ThrottleRetryAfter: cfg.scaled(time.Second),
		SlowDelay:          cfg.Lease * 3 / 2,
		LongDelay:          cfg.LongCall,
		StreamChunkDelay:   streamChunkDelay, // only the stream kinds' calls stream
		NoIdempotency:      cfg.Mode != ModeIdempotent,
		NoReadback:         cfg.Mode == ModePlain,
	})
	s.plan = faultinject.NewPlan()
	for _, t := range s.tasks {
		if sc := providerScript(t.kind, cfg.MaxAttempts); len(sc) > 0 {
			s.prov.Script(t.id, sc...)
		}
		for _, st := range awsSteps(t, cfg.Seed) {
			s.plan.Add(t.id, st)
		}
	}
	s.inj = faultinject.New(faultinject.Chain{s.plan, faultinject.Rates{Seed: cfg.Seed, Rules: cfg.Background}})
	s.inj.OnInject = s.onInject
	s.inj.OnResult = s.onResult
	s.counter = awsclient.NewCounter()
	s.replay = &faultinject.Replayer{Decide: s.decideReplay, OnReplay: s.onReplay}
	faulty := env.AWS.Copy()
	// The replayer before the injector: both sends of a replayed write
	// pass the injector, whose OnResult counts result writes.
	faulty.APIOptions = append(append([]func(*middleware.Stack) error{}, env.AWS.APIOptions...), s.counter.Register, s.replay.Register, s.inj.Register, s.lat.register)
	ddb, sq := awsclient.DynamoDB(faulty), awsclient.SQS(faulty)
	// The S3 claim-check, as deployed (PAYLOAD_BUCKET on submit and
	// worker): the handlers' store goes through the faulty middleware.
	var handlerPayloads *payload.Store
	if env.Names.PayloadBucket != "" {
		var err error
		if handlerPayloads, err = payload.New(awsclient.S3(faulty), env.Names.PayloadBucket, payload.Options{}); err != nil {
			return err
		}
		if s.payloads, err = payload.New(awsclient.S3(env.AWS), env.Names.PayloadBucket, payload.Options{}); err != nil {
			return err
		}
	}

	lcfg := ledger.Config{
		TasksTable: env.Names.TasksTable, ReviewTable: env.Names.ReviewTable, WatchTable: env.Names.WatchTable,
		MaxAttempts: cfg.MaxAttempts, MaxAge: cfg.MaxAge, DispatchTimeout: cfg.DispatchTimeout,
	}
	led, err := ledger.New(ddb, lcfg)
	if err != nil {
		return err
	}
	if s.clean, err = ledger.New(s.cleanDB, lcfg); err != nil {
		return err
	}
	sender := &dispatch.Sender{SQS: sq, QueueURL: env.Names.TaskQueueURL}
	prov := &countingProvider{Provider: s.prov, s: s}
	extra, err := s.followUpDestinations(ctx)
	if err != nil {
		return err
	}
	if s.dests, err = s.destinations(extra...); err != nil {
		return err
	}
	s.submit = &api.Handler{Ledger: led, Dispatch: sender, Log: s.log, Destinations: s.dests, Payloads: handlerPayloads, Notify: s.notify}
	if err := s.wireDecisions(lcfg); err != nil {
		return err
	}
	if err := s.wireDocuments(lcfg); err != nil {
		return err
	}
	s.work = &worker.Handler{
		Ledger: led, Provider: prov, Destinations: s.dests, SQS: sq, QueueURL: env.Names.TaskQueueURL,
		Policy: retrypolicy.Policy{Base: cfg.scaled(50 * time.Millisecond), Cap: cfg.scaled(time.Second), MaxAttempts: cfg.MaxAttempts, MaxAge: cfg.MaxAge},
		// Ten records at once, as the soak always ran them (the deployed
		// default is 4): the load of earlier 10,000-task runs, comparable.
		Lease: cfg.Lease, Concurrency: 10, DeadlineMargin: cfg.DeadlineMargin, Log: s.log, Hooks: s.hooks(),
		Payloads: handlerPayloads, Notify: s.notify,
	}
	for i := range s.reconciles {
		s.reconciles[i] = &reconciler.Handler{
			Ledger: led, Dispatch: sender, DLQ: sq, DLQURL: env.Names.DeadLetterQueueURL, Provider: prov, Destinations: s.dests, Log: s.log,
			Backlog: &dispatch.Backlog{SQS: sq, QueueURL: env.Names.TaskQueueURL},
			Budget:  cfg.ReconcileBudget, Grace: cfg.Lease / 2, Settle: cfg.scaled(reconcileSettle), RelaySlack: cfg.scaled(2 * time.Second),
			Payloads: handlerPayloads, Notify: s.notify,
		}
	}
	s.wireStreams()
	return s.wireSpend(ddb)
}

// eventSources builds the SQS event source mapping (from the template, on
// the clean client: it is AWS's side) and the schedule.
func (s *soak) eventSources() (*local.Poller, *local.Ticker, error) {
	tpl := stack.MustLoadDefault()
	var mapping *stack.EventSourceMapping
	for _, m := range tpl.SQSEvents() {
		if m.Function == workerFunction && m.Queue == taskQueue {
			mapping = &m
		}
	}
	if mapping == nil {
		return nil, nil, errors.New("soak: template.yaml has no SQS event of WorkerFunction on TaskQueue")
	}
	p := local.MappingPoller(*mapping, tpl.Functions()[workerFunction])
	p.SQS = gatedSQS{PollerSQS: s.cleanQ, g: s.gate}
	p.Timeout = s.cfg.FunctionTimeout // the template's, compressed
	p.QueueURL, p.QueueARN = s.env.Names.TaskQueueURL, s.env.Names.TaskQueueARN
	p.Region = s.env.AWS.Region
	p.PollWait = local.EmbeddedPollWait
	p.Deliver = s.deliver
	p.OnBatch = s.onBatch
	p.Log = s.log
	t := &local.Ticker{
		Every: s.cfg.ReconcileEvery, RunAtStart: true, Timeout: s.cfg.ReconcileBudget + s.cfg.scaled(10*time.Second),
		FunctionName: "ReconcilerFunction", Region: s.env.AWS.Region, Deliver: s.reconcile,
	}
	return p, t, nil
}

// once reports whether the one-shot fault k has not fired for id yet, and
// marks it fired.
func (s *soak) once(k Kind, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := string(k) + "|" + id
	if s.fired[key] {
		return false
	}
	s.fired[key] = true
	return true
}

func (s *soak) inject(k Kind) {
	s.mu.Lock()
	s.injected[k]++
	s.mu.Unlock()
}

func (s *soak) note(k Kind, msg string) {
	s.mu.Lock()
	if len(s.notes[k]) < 5 {
		s.notes[k] = append(s.notes[k], msg)
	}
	s.mu.Unlock()
}

// onInject attributes an AWS fault: to the task's planned kind when the
// plan scripted it, to the background otherwise.
func (s *soak) onInject(c faultinject.Call, k faultinject.Kind) {
	if t := s.byID[c.TaskID]; t != nil && s.plan.Decide(c) == k {
		s.inject(t.kind)
		return
	}
	s.touch(c.TaskID)
	s.inject(BackgroundAWS)
}

// onResult counts result writes at the SDK: an UpdateItem whose SET
// assigns the result attribute.
//
// A transaction that saves a result (CompleteLapsed: a slow worker's result
// settling its unknown_outcome park, together with the review item) counts
// the same way, for the task its Update names.
func (s *soak) onResult(c faultinject.Call, params, _ any, err error) {
	switch in := params.(type) {
	case *dynamodb.UpdateItemInput:
		if in.UpdateExpression == nil || !setsResult(*in.UpdateExpression, in.ExpressionAttributeNames) {
			return
		}
	case *dynamodb.TransactWriteItemsInput:
		id := ""
		for _, it := range in.TransactItems {
			if u := it.Update; u != nil && u.UpdateExpression != nil && setsResult(*u.UpdateExpression, u.ExpressionAttributeNames) {
				if k, ok := u.Key["task_id"].(*types.AttributeValueMemberS); ok {
					id = k.Value
				}
			}
		}
		if id == "" {
			return
		}
		c.TaskID = id
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			// A refused condition: the transaction's form of a fenced save.
			err = &types.ConditionalCheckFailedException{}
		}
	default:
		return
	}
	var ccf *types.ConditionalCheckFailedException
	s.mu.Lock()
	switch {
	case err == nil:
		s.saves[c.TaskID]++
	case errors.As(err, &ccf):
		s.fencedSav[c.TaskID]++
	default:
		// No answer (the invocation's deadline, a lost reply): the write
		// may have been applied.
		s.maybeSav[c.TaskID]++
	}
	s.mu.Unlock()
}

// setsAttr reports whether an update expression's SET clause assigns attr
// (through an expression name).
// setsResult reports whether an update saves a result: inline (result)
// or by reference to the S3 claim-check (result_ref).
func setsResult(expr string, names map[string]string) bool {
	return setsAttr(expr, names, "result") || setsAttr(expr, names, "result_ref")
}

func setsAttr(expr string, names map[string]string, attr string) bool {
	set, _, ok := splitSet(expr)
	if !ok {
		return false
	}
	for _, part := range set {
		lhs, _, ok := cutEq(part)
		if !ok {
			continue
		}
		if names[lhs] == attr || lhs == attr {
			return true
		}
	}
	return false
}

// errKilled is what a hook returns to kill the worker at a step boundary.
var errKilled = errors.New("soak: worker killed here")

func (s *soak) hooks() *worker.Hooks {
	kill := func(k Kind) func(context.Context, string) error {
		return func(_ context.Context, id string) error {
			if t := s.byID[id]; t != nil && t.kind == k && s.once(k, id) {
				s.inject(k)
				return errKilled
			}
			return nil
		}
	}
	afterProvider, afterSave := kill(KillAfterProvider), kill(KillAfterSave)
	return &worker.Hooks{
		BeforeClaim: kill(KillBeforeClaim),
		AfterClaim:  s.afterClaim(kill(KillAfterClaim)),
		AfterProvider: func(ctx context.Context, id string) error {
			if t := s.byID[id]; t != nil && t.kind == StreamKilled && s.once(StreamKilled, id) {
				s.inject(StreamKilled)
				return errKilled // after the streamed call, before the save
			}
			if t := s.byID[id]; t != nil && t.kind == StaleWorker && s.once(StaleWorker, id) {
				s.stale(ctx, id)
				return nil // carry on as the stale worker: its save must be fenced
			}
			return afterProvider(ctx, id)
		},
		AfterSave: func(ctx context.Context, id string) error {
			s.onSaved(id)
			return afterSave(ctx, id)
		},
	}
}

// stale pauses the worker (its heartbeat has stopped, so its lease runs
// out) until the task was taken from it, then lets it carry on as the
// stale worker whose late result write must be fenced.
//
// The takeover is the reconciler's, but not left to a scheduled run's
// walk: that walk reads every (state, shard) stream of the by_state index
// one page at a time within its budget, and on a loaded emulator (moto
// serves one request at a time) a run may not reach the task's stream
// before the worker's invocation ends. Once the lease is more than the
// reconcilers' Grace past, the pause applies the reconciler's rules to
// this one task (reconciler.Handler.HandleTask, on the handlers' faulty
// clients), and again after every read that still finds it running at its
// version (a write lost to an injected fault; a scheduled run may also get
// there first). The task then moves on: re-queued and claimed anew where a
// re-run is safe, to unknown where it is not. The pause lasts at most
// until ctx ends: the invocation's deadline less the worker's margin.
func (s *soak) stale(ctx context.Context, id string) {
	rc := s.reconciles[0]
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	wait := func(c <-chan time.Time, why string) bool {
		select {
		case <-ctx.Done():
			s.note(StaleWorker, "invocation deadline "+why+" of "+id)
			return false
		case <-c:
			return true
		}
	}
	var t0 *ledger.Task
	for {
		t, err := s.clean.Get(ctx, id)
		if err == nil {
			t0 = t
			break
		}
		if !wait(tick.C, "before the task could be read for the pause") {
			return
		}
	}
	if t0.State != ledger.StateRunning {
		// Moved on while the provider answered (a fenced heartbeat, a
		// cancel): already not this worker's.
		s.inject(StaleWorker)
		return
	}
	// The reconciler acts on a lease more than Grace past, by the ledger's
	// clock, at the earliest.
	expired := time.NewTimer(time.UnixMilli(t0.LeaseUntil).Add(rc.Grace + time.Millisecond).Sub(s.clean.Now()))
	defer expired.Stop()
	if !wait(expired.C, "before the lease expired") {
		return
	}
	for {
		t, err := s.clean.Get(ctx, id)
		if err == nil && (t.AssignmentVersion > t0.AssignmentVersion || t.State != ledger.StateRunning) {
			s.inject(StaleWorker)
			return
		}
		// HandleTask only once a run would act on the task (rc.Due, on the
		// uncounted client's read: its due_at, which a renewal rounds up
		// to whole leases, and its lease Grace past): HandleTask reads it
		// with the handlers' client, and a call that finds it not due yet
		// is a read the run would not make.
		if err == nil && rc.Due(t, s.clean.Now()) {
			if sum, _ := rc.HandleTask(ctx, id); sum.Requeued+sum.ExpiredToUnknown+sum.Parked+sum.Completed+sum.Cancelled > 0 {
				s.mu.Lock()
				s.staleTakeovers++
				s.mu.Unlock()
				continue // read the task as the takeover left it
			}
		}
		if !wait(tick.C, "before a takeover") {
			return
		}
	}
}

// countingProvider counts the scripted provider faults as they happen.
type countingProvider struct {
	*simulated.Provider
	s *soak
}

// CallTimeout is the provider adapter's bound on one call (the soak's
// compressed 2 min).
func (p *countingProvider) CallTimeout() time.Duration { return p.s.cfg.CallTimeout }

func (p *countingProvider) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	return p.generateWith(ctx, req, nil)
}

// generateWith is Generate, or GenerateStream through onDelta when it is
// not nil (stream.go).
func (p *countingProvider) generateWith(ctx context.Context, req contract.Request, onDelta contract.DeltaFunc) (contract.Result, error) {
	// A call started with clearly less than its call timeout before its
	// context's deadline was admitted without the time it needs, whatever
	// the worker calls the cause of that deadline.
	dl, hasDeadline := ctx.Deadline()
	short := hasDeadline && time.Until(dl) < p.s.cfg.CallTimeout*9/10
	callCtx, cancel := context.WithTimeout(ctx, p.s.cfg.CallTimeout)
	var res contract.Result
	var err error
	if onDelta != nil {
		res, err = p.s.prov.GenerateStream(callCtx, req, onDelta)
	} else {
		res, err = p.s.generate(callCtx, req)
	}
	cancel()
	s := p.s
	s.mu.Lock()
	s.provCalls++
	if err != nil && (errors.Is(context.Cause(ctx), context.DeadlineExceeded) || (short && errors.Is(ctx.Err(), context.DeadlineExceeded))) {
		// The worker's own context (the invocation's deadline less its
		// margin) ended the call, not the call's timeout: the worker's
		// call timeout has its own cause, and a slow call on a loaded
		// machine that runs into it is not cut by the deadline.
		s.cut[req.OperationID]++
	}
	s.mu.Unlock()
	t := s.byID[req.OperationID]
	if t == nil {
		return res, err
	}
	var fe *simulated.FaultError
	switch {
	case t.kind == RetryLostReply: // counted where the write is replayed
	case t.kind == NotifyParked: // counted where its notification is sent
	case t.kind == OversizedResult && err == nil && len(res.Output) > ItemLimit:
		s.inject(t.kind)
	case errors.As(err, &fe) && fe.Fault != simulated.Slow:
		s.inject(t.kind)
	case t.kind == ProviderSlow && s.once(ProviderSlow, t.id):
		s.inject(ProviderSlow)
	}
	return res, err
}

// deliver is the worker function behind the poller. Records of tasks
// planned for a duplicate delivery are delivered twice: at once, in a second
// invocation with the same message id and receipt handle (two pollers
// received it), or again after this invocation, as a new message.
func (s *soak) deliver(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	pressure, rest := s.pressured(ev.Records)
	ev.Records = rest
	var dups []events.SQSMessage
	var late []string
	for _, r := range ev.Records {
		m, err := dispatch.Parse(r.Body)
		if err != nil {
			continue
		}
		t := s.byID[m.TaskID]
		if t == nil || t.kind != DuplicateDelivery || !s.once(DuplicateDelivery, t.id) {
			continue
		}
		s.inject(DuplicateDelivery)
		if t.racing {
			dups = append(dups, r)
		} else {
			late = append(late, t.id)
		}
	}
	var wg sync.WaitGroup
	var lateResp events.SQSEventResponse
	var lateErr error
	if len(pressure) > 0 {
		// Alongside the rest of the batch, so that their own time does not
		// push the late wave past the deadline.
		wg.Go(func() { lateResp, lateErr = s.lateWave(ctx, pressure) })
	}
	if len(dups) > 0 {
		// The duplicate's own response does not matter: the message is
		// deleted (or kept) by the receipt of the first delivery.
		wg.Go(func() { _, _ = s.work.Handle(ctx, events.SQSEvent{Records: dups}) })
	}
	resp, err := s.work.Handle(ctx, ev)
	wg.Wait()
	resp.BatchItemFailures = append(resp.BatchItemFailures, lateResp.BatchItemFailures...)
	err = errors.Join(err, lateErr)
	sender := dispatch.Sender{SQS: s.cleanQ, QueueURL: s.env.Names.TaskQueueURL}
	for _, id := range late {
		if serr := sender.Send(context.WithoutCancel(ctx), id, "", 0); serr != nil {
			s.note(DuplicateDelivery, "late duplicate send failed: "+serr.Error())
		}
	}
	return resp, err
}

func (s *soak) onBatch(r local.BatchReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches.Batches++
	s.batches.Records += r.Records
	s.batches.ItemFailures += r.ItemFailures
	s.batches.Deleted += r.Deleted
	if r.Err != nil {
		s.batches.Failed++
	}
}

// reconcile is the scheduled function: on a seeded share of ticks two
// reconcilers run at once.
func (s *soak) reconcile(ctx context.Context, ev json.RawMessage) error {
	s.mu.Lock()
	s.ticks++
	tick := s.ticks
	span := len(s.runs)
	s.runs = append(s.runs, tickSpan{start: time.Now()})
	s.mu.Unlock()
	race := faultinject.Draw(s.cfg.Seed, "reconciler_race", strconv.Itoa(tick)) < s.cfg.RaceShare
	n := 1
	if race {
		n = 2
		s.inject(ReconcilerRace)
	}
	var wg sync.WaitGroup
	sums := make([]reconciler.Summary, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { sums[i], errs[i] = s.reconciles[i].Handle(ctx, ev) })
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[span].end = time.Now()
	for _, sum := range sums {
		s.runs[span].complete = s.runs[span].complete || !sum.Partial
	}
	for i, sum := range sums {
		st := &s.recon
		st.Runs++
		if errs[i] != nil {
			st.Errors++
		}
		if sum.Partial {
			st.Partial++
		}
		st.Raced += sum.Raced
		st.Requeued += sum.Requeued
		st.Resent += sum.Resent
		st.Parked += sum.Parked
		st.Completed += sum.Completed
		st.ExpiredToUnknown += sum.ExpiredToUnknown
		st.Poison += sum.PoisonMessages
	}
	return errors.Join(errs...)
}

// tickSpan is one reconciler tick: its start, its end (once it ended), and
// whether one of its runs walked every due task (no time budget or
// MaxPerRun cut its walk short).
type tickSpan struct {
	start, end time.Time
	complete   bool
}

// finalBy is the latest a task whose age budget ends at deadline may become
// final: the end of the second reconciler tick that started after the
// deadline and walked every due task (the first may lose its write to an
// injected fault or a racing run; the next one retries it), and never
// earlier than one period plus one run budget after it. Measured from the
// ticks rather than a fixed allowance, the rule holds however slow a loaded
// machine makes the runs (a walk cut short by its time budget starts over
// next run), and still catches a reconciler that lets a budget run over:
// that one misses walk after walk. A run counts until twice its budget
// plus a second (one that ignores its budget does not stretch the
// allowance); with fewer than two complete walks after the deadline, the
// allowance is the floor plus ten periods.
func (s *soak) finalBy(deadline time.Time) time.Time {
	floor := deadline.Add(s.cfg.ReconcileEvery + s.cfg.ReconcileBudget)
	// A run counts until its budget (twice over, for the writes in flight
	// when it ran out, plus a second): one that ignores its budget does
	// not stretch the allowance with it.
	longest := 2*s.cfg.ReconcileBudget + time.Second
	seen := 0
	for _, r := range s.runs {
		if r.start.Before(deadline) || r.end.IsZero() || !r.complete {
			continue
		}
		if seen++; seen == 2 {
			end := r.end
			if cap := r.start.Add(longest); end.After(cap) {
				end = cap
			}
			if end.After(floor) {
				return end
			}
			return floor
		}
	}
	// Fewer than two complete walks after the deadline: the reconciler
	// never got through its due tasks; ten periods past the floor is all
	// it gets.
	return floor.Add(10 * s.cfg.ReconcileEvery)
}

// drain waits until every task that exists is final and every poison
// message is recorded, or DrainTimeout passes.
func (s *soak) drain(ctx context.Context) bool {
	deadline := time.Now().Add(s.cfg.DrainTimeout)
	lastReport := time.Now()
	for {
		tasks, err := s.scanTasks(ctx)
		live := 0
		if err == nil {
			for _, t := range tasks {
				if t.State.Live() {
					live++
				}
			}
		}
		poisonOK := err == nil && s.poisonRecorded(ctx)
		if err == nil && live == 0 && poisonOK {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.progress("soak: drain timeout: %d live tasks, poison recorded: %t", live, poisonOK)
			return false
		}
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			s.progress("soak: %s: %d tasks stored, %d live", time.Since(s.start).Round(time.Second), len(tasks), live)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // polling the tables: no event to wait on
		}
	}
}

func (s *soak) poisonRecorded(ctx context.Context) bool {
	s.mu.Lock()
	msgs := append([]poisonMsg(nil), s.poison...)
	s.mu.Unlock()
	for _, m := range msgs {
		if _, err := s.clean.GetReview(ctx, ledger.PoisonID(m.id)); err != nil {
			return false
		}
	}
	return true
}

// scanTasks reads the whole tasks table (consistent).
func (s *soak) scanTasks(ctx context.Context) ([]ledger.Task, error) {
	var out []ledger.Task
	err := s.scan(ctx, s.env.Names.TasksTable, func(items []map[string]types.AttributeValue) error {
		var page []ledger.Task
		if err := attributevalue.UnmarshalListOfMaps(taskItems(items), &page); err != nil {
			return err
		}
		out = append(out, page...)
		return nil
	})
	return out, err
}

// taskItems keeps the tasks of a page of the tasks table: spend# budget,
// quota# and adm# admission items live there too.
func taskItems(items []map[string]types.AttributeValue) []map[string]types.AttributeValue {
	out := items[:0:0]
	for _, it := range items {
		if k, ok := it["task_id"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(k.Value, "t_") {
			out = append(out, it)
		}
	}
	return out
}

func (s *soak) scanReviews(ctx context.Context) ([]ledger.Review, error) {
	var out []ledger.Review
	err := s.scan(ctx, s.env.Names.ReviewTable, func(items []map[string]types.AttributeValue) error {
		var page []ledger.Review
		if err := attributevalue.UnmarshalListOfMaps(items, &page); err != nil {
			return err
		}
		out = append(out, page...)
		return nil
	})
	return out, err
}

func (s *soak) scan(ctx context.Context, table string, page func([]map[string]types.AttributeValue) error) error {
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := s.cleanDB.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("soak: scan %s: %w", table, err)
		}
		if err := page(out.Items); err != nil {
			return err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
