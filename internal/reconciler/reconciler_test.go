package reconciler_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type bundle struct {
	env   *testenv.Env
	l     *ledger.Ledger
	clock *testenv.Clock
	prov  *simulated.Provider
	emf   *testenv.Buffer
}

// testShards is the by_state shard count of the tests' ledgers. Every
// reconciler run queries each (state, shard) stream twice, to walk and to
// count, whatever the tables hold: 161 queries at the default 16 shards,
// 21 at 2, and on moto a query costs milliseconds of its one-at-a-time
// CPU. The rules under test see a handful of tasks and do not depend on
// the count; two shards still spread them over more than one stream.
// TestReadsIndependentOfHistory, which measures a run's reads, keeps
// ledger.DefaultShards.
const testShards = 2

func setup(t *testing.T, e *testenv.Env, popts ...simulated.Options) *bundle {
	t.Helper()
	return setupShards(t, e, testShards, popts...)
}

// setupShards is setup with a ledger of the given shard count.
func setupShards(t *testing.T, e *testenv.Env, shards int, popts ...simulated.Options) *bundle {
	t.Helper()
	c := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, WatchTable: e.Names.WatchTable,
		Now: c.Now, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	o := simulated.Options{Clock: c.Now}
	if len(popts) > 0 {
		o = popts[0]
		o.Clock = c.Now
	}
	return &bundle{env: e, l: l, clock: c, prov: simulated.New(o), emf: &testenv.Buffer{}}
}

func (b *bundle) handler() *reconciler.Handler {
	return &reconciler.Handler{
		Ledger:   b.l,
		Dispatch: &dispatch.Sender{SQS: b.env.SQS, QueueURL: b.env.Names.TaskQueueURL},
		Backlog:  &dispatch.Backlog{SQS: b.env.SQS, QueueURL: b.env.Names.TaskQueueURL},
		DLQ:      b.env.SQS,
		DLQURL:   b.env.Names.DeadLetterQueueURL,
		Provider: b.prov,
		Metrics:  metrics.NewWriter(b.emf),
		Log:      logging.Discard(),
	}
}

var ctx = context.Background()

func create(t *testing.T, b *bundle, key string, mod ...func(*ledger.NewTask)) *ledger.Task {
	t.Helper()
	n := ledger.NewTask{Scope: "alice", IdempotencyKey: key, Kind: contract.KindGenerate,
		Input: `{"prompt":"hello ` + key + `"}`, PayloadSHA256: "sha-" + key}
	for _, m := range mod {
		m(&n)
	}
	task, err := b.l.Create(ctx, n)
	if err != nil {
		t.Fatalf("create %s: %v", key, err)
	}
	return task
}

func claim(t *testing.T, b *bundle, id string) *ledger.Task {
	t.Helper()
	task, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "worker-1", Lease: 30 * time.Second})
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	return task
}

// markCall records the call-start mark of the claimed assignment, as the
// worker does right before calling a provider that neither deduplicates
// nor reads back.
func markCall(t *testing.T, b *bundle, c *ledger.Task) {
	t.Helper()
	if _, err := b.l.MarkCallStarted(ctx, c.TaskID, c.AssignmentVersion, 30*time.Second); err != nil {
		t.Fatalf("mark call started %s: %v", c.TaskID, err)
	}
}

func get(t *testing.T, b *bundle, id string) *ledger.Task {
	t.Helper()
	task, err := b.l.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return task
}

func handle(t *testing.T, h *reconciler.Handler) reconciler.Summary {
	t.Helper()
	s, err := h.Handle(ctx, json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("Handle: %v (summary %+v)", err, s)
	}
	return s
}

// runTwice runs two reconcilers at once and returns both summaries.
func runTwice(t *testing.T, b *bundle, mod func(*reconciler.Handler)) [2]reconciler.Summary {
	t.Helper()
	var out [2]reconciler.Summary
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 2 {
		h := b.handler()
		if mod != nil {
			mod(h)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = h.Handle(ctx, json.RawMessage(`{}`))
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reconciler %d: %v", i, err)
		}
	}
	return out
}

func TestExpiredLeaseWithBudgetIsRequeuedAndCompletes(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e) // idempotent simulated provider: re-running is safe
		task := create(t, b, "lease-1")
		c := claim(t, b, task.TaskID)

		b.clock.Advance(10 * time.Second) // lease still live (+grace)
		if s := handle(t, b.handler()); s.Requeued != 0 {
			t.Fatalf("requeued a task with a live lease: %+v", s)
		}
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if s.Requeued != 1 || s.Parked != 0 {
			t.Fatalf("summary = %+v, want 1 requeued", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateQueued || got.LeaseOwner != "" {
			t.Fatalf("task = %s owner %q, want queued without lease", got.State, got.LeaseOwner)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v, want one message for %s", ids, task.TaskID)
		}
		// The old worker is fenced; a new claim works and completes.
		if _, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{}`}); !isFenced(err) {
			t.Fatalf("stale worker's complete = %v, want fenced", err)
		}
		c2 := claim(t, b, task.TaskID)
		if c2.Attempts != 2 || c2.AssignmentVersion != c.AssignmentVersion+1 {
			t.Fatalf("second claim: attempts %d version %d", c2.Attempts, c2.AssignmentVersion)
		}
		if _, err := b.l.Complete(ctx, task.TaskID, c2.AssignmentVersion, ledger.Completion{Result: `{"text":"ok"}`}); err != nil {
			t.Fatalf("complete: %v", err)
		}
	})
}

func isFenced(err error) bool {
	var fe *ledger.FencedError
	return errors.As(err, &fe)
}

func TestExpiredLeaseWithoutBudgetIsParkedOnceUnderRace(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		const n = 4
		var ids []string
		for i := range n {
			task := create(t, b, "nobudget-"+string(rune('a'+i)), func(n *ledger.NewTask) { n.MaxAttempts = 1 })
			claim(t, b, task.TaskID)
			ids = append(ids, task.TaskID)
		}
		b.clock.Advance(2 * time.Minute)
		sums := runTwice(t, b, func(h *reconciler.Handler) {
			h.Provider = nil // no readback
			h.SideEffects = func(string) bool { return false }
		})
		if got := sums[0].Parked + sums[1].Parked; got != n {
			t.Fatalf("parked %d tasks in total, want %d (summaries %+v)", got, n, sums)
		}
		for _, id := range ids {
			task := get(t, b, id)
			if task.State != ledger.StateNeedsReview || task.ReviewReason != ledger.ReviewBudgetExhausted {
				t.Fatalf("task %s = %s/%s, want needs_review/budget_exhausted", id, task.State, task.ReviewReason)
			}
			r, err := b.l.GetReview(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.ParkCount != 1 || r.ReviewStatus != ledger.ReviewOpen || r.Reason != ledger.ReviewBudgetExhausted || r.TaskState != string(ledger.StateRunning) {
				t.Fatalf("review = %+v, want one open budget_exhausted park of a running task", r)
			}
			if !strings.Contains(r.Summary, "used 1 of 1 attempts") {
				t.Fatalf("summary = %q", r.Summary)
			}
		}
		open, _, err := tasklist.ListOpenReviews(ctx, b.l, 100, "")
		if err != nil || len(open) != n {
			t.Fatalf("open reviews = %d (%v), want %d", len(open), err, n)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 0 {
			t.Fatalf("parked tasks were sent: %v", ids)
		}
	})
}

func TestExpiredLeaseWithSideEffectsGoesUnknownThenParks(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		task := create(t, b, "side-1")
		markCall(t, b, claim(t, b, task.TaskID)) // the worker dies during its call
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if s.ExpiredToUnknown != 1 || s.Requeued != 0 {
			t.Fatalf("summary = %+v, want the task moved to unknown, not re-queued", s)
		}
		if got := get(t, b, task.TaskID); got.State != ledger.StateUnknown {
			t.Fatalf("state = %s, want unknown", got.State)
		}
		b.clock.Advance(time.Minute)
		s = handle(t, b.handler())
		if s.Parked != 1 || s.ReadbackNoReadback != 1 {
			t.Fatalf("summary = %+v, want parked unknown_outcome", s)
		}
		if got := get(t, b, task.TaskID); got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("task = %s/%s", got.State, got.ReviewReason)
		}
		if r, err := b.l.GetReview(ctx, task.TaskID); err != nil || !strings.Contains(strings.Join(r.Known, "\n"), "attempt 1 of 5: its worker recorded that its call to simulated") ||
			!strings.Contains(strings.Join(r.Known, "\n"), "cannot be known") {
			t.Fatalf("review %+v (%v); want it to say the call was starting and whether it was sent cannot be known", r, err)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 0 {
			t.Fatalf("a step with side effects was re-sent: %v", ids)
		}
	})
}

// unknownTask creates a task (opts adjust it) whose attempt ended
// unknown; with performed, the provider really generated (and lost the
// reply).
func unknownTask(t *testing.T, b *bundle, key string, performed bool, opts ...func(*ledger.NewTask)) *ledger.Task {
	t.Helper()
	task := create(t, b, key, opts...)
	c := claim(t, b, task.TaskID)
	if performed {
		b.prov.Script(task.TaskID, simulated.AcceptLoseReply)
		_, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)})
		if err == nil {
			t.Fatal("scripted accept_lose_reply returned no error")
		}
	}
	u, err := b.l.MarkUnknown(ctx, task.TaskID, c.AssignmentVersion, "unknown_outcome", "reply lost")
	if err != nil {
		t.Fatalf("mark unknown: %v", err)
	}
	return u
}

func TestUnknownWithReadbackHitCompletes(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := unknownTask(t, b, "rb-hit", true)
		rec, _ := b.prov.Record(task.TaskID)

		b.clock.Advance(5 * time.Second) // not settled yet
		if s := handle(t, b.handler()); s.Completed != 0 || s.ReadbackFound != 0 {
			t.Fatalf("read back before Settle: %+v", s)
		}
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if s.Completed != 1 || s.ReadbackFound != 1 {
			t.Fatalf("summary = %+v, want 1 completed from readback", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateCompleted || got.ReadbackAt == "" || got.Result != string(rec.Result.Output) || got.ProviderRef != rec.Result.ProviderRef {
			t.Fatalf("task = %s readback_at %q provider_ref %q result match %v", got.State, got.ReadbackAt, got.ProviderRef, got.Result == string(rec.Result.Output))
		}
		if want := b.clock.Now().UTC().Format(time.RFC3339); !strings.HasPrefix(got.ReadbackAt, want[:16]) {
			t.Fatalf("readback_at = %s, want about %s", got.ReadbackAt, want)
		}
		if n := b.prov.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("provider side effects = %d, want 1 (no re-generation)", n)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 0 {
			t.Fatalf("a read-back task was re-sent: %v", ids)
		}
	})
}

func TestUnknownNeverHappenedIsRequeued(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := unknownTask(t, b, "rb-miss", false)
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if s.ReadbackNotFound != 1 || s.Requeued != 1 {
			t.Fatalf("summary = %+v, want not_found + requeued", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateQueued || got.ErrorClass != ledger.ErrorReadbackAbsent {
			t.Fatalf("state = %s, error class %q; want queued, %s (the uncertainty is resolved)", got.State, got.ErrorClass, ledger.ErrorReadbackAbsent)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v", ids)
		}
		// It then runs out of age budget while queued (the 10,000-task soak
		// under load): its review must not say the provider may have acted.
		b.clock.Set(time.UnixMilli(got.DeadlineMs).Add(time.Second))
		if s := handle(t, b.handler()); s.Parked != 1 {
			t.Fatalf("summary = %+v, want the task parked at its age budget", s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil || strings.Contains(strings.ToLower(r.Summary+strings.Join(r.Uncertain, " ")), "may have") {
			t.Fatalf("review after a credible not-found: %q / %q (%v); it must not say the provider may have acted", r.Summary, r.Uncertain, err)
		}
	})
}

func TestUnknownWithoutReadbackIsParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoReadback: true})
		task := unknownTask(t, b, "rb-none", true)
		b.clock.Advance(time.Minute)
		s := handle(t, b.handler())
		if s.Parked != 1 || s.ReadbackNoReadback != 1 {
			t.Fatalf("summary = %+v, want parked with no readback", s)
		}
		got := get(t, b, task.TaskID)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("task = %s/%s", got.State, got.ReviewReason)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		at := time.UnixMilli(task.DueAt).UTC().Format(time.RFC3339)
		want := "the provider may have produced a result at " + at + "; no readback is possible; safe: resolve as completed with evidence, or retry accepting a possible duplicate generation"
		if r.Reason != ledger.ReviewUnknownOutcome || !strings.Contains(r.Summary, want) {
			t.Fatalf("review summary = %q, want it to contain %q", r.Summary, want)
		}
		if len(r.Known) == 0 || len(r.Uncertain) == 0 || len(r.SafeActions) < 2 {
			t.Fatalf("review lists = %+v", r)
		}
	})
}

func TestLostSendIsResentExactlyOnce(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "lost-send") // never sent: the submit's send was "lost"
		b.clock.Advance(ledger.DefaultDispatchTimeout - time.Second)
		if s := handle(t, b.handler()); s.Resent != 0 {
			t.Fatalf("re-sent before the dispatch deadline: %+v", s)
		}
		b.clock.Advance(2 * time.Second)
		tick, err := os.ReadFile("../../events/scheduler-tick.json")
		if err != nil {
			t.Fatal(err)
		}
		var sums [2]reconciler.Summary
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if sums[i], err = b.handler().Handle(ctx, tick); err != nil {
					t.Errorf("reconciler %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if got := sums[0].Resent + sums[1].Resent; got != 1 {
			t.Fatalf("re-sent %d times, want exactly 1 (%+v)", got, sums)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 || ids[0] != task.TaskID {
			t.Fatalf("queue = %v, want exactly one message for %s", ids, task.TaskID)
		}
		if got := get(t, b, task.TaskID); got.Dispatches != 1 || got.State != ledger.StateQueued {
			t.Fatalf("task dispatches = %d state %s", got.Dispatches, got.State)
		}
		// Not due again right away; the worker then completes it.
		if s := handle(t, b.handler()); s.Resent != 0 {
			t.Fatalf("re-sent again immediately: %+v", s)
		}
		c := claim(t, b, task.TaskID)
		if _, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"ok"}`}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.emf.String(), `"DispatchesResent":1`) {
			t.Fatalf("EMF output lacks DispatchesResent=1:\n%s", b.emf.String())
		}
	})
}

func TestOverdueRetryWaitIsResent(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "retry-1")
		c := claim(t, b, task.TaskID)
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c.AssignmentVersion, b.clock.Now().Add(10*time.Second), "transient", "503"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(20 * time.Second) // due, but within RelaySlack
		if s := handle(t, b.handler()); s.Resent != 0 {
			t.Fatalf("re-sent within the relay slack: %+v", s)
		}
		b.clock.Advance(time.Minute)
		if s := handle(t, b.handler()); s.Resent != 1 {
			t.Fatalf("summary = %+v, want 1 re-sent", s)
		}
		if ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL); len(ids) != 1 {
			t.Fatalf("queue = %v", ids)
		}
		if got := claim(t, b, task.TaskID); got.Attempts != 2 {
			t.Fatalf("attempts = %d", got.Attempts)
		}
	})
}

func TestPastAgeBudgetIsParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task := create(t, b, "old-1", func(n *ledger.NewTask) { n.MaxAge = 5 * time.Minute })
		b.clock.Advance(6 * time.Minute)
		s := handle(t, b.handler())
		if s.Parked != 1 || s.Resent != 0 {
			t.Fatalf("summary = %+v, want parked, not re-sent", s)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Reason != ledger.ReviewBudgetExhausted || !strings.Contains(r.Summary, "5m age budget") || !strings.Contains(strings.Join(r.Known, "\n"), "budget exhausted: max_age") {
			t.Fatalf("review = %q / %v", r.Summary, r.Known)
		}
	})
}

func TestPoisonMessageBecomesReviewItem(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		dlq := e.Names.DeadLetterQueueURL
		done := create(t, b, "dl-done")
		c := claim(t, b, done.TaskID)
		if _, err := b.l.Complete(ctx, done.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{}`}); err != nil {
			t.Fatal(err)
		}
		garbage := `{"prompt":"not a task reference"}`
		out, err := e.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(garbage)})
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := json.Marshal(dispatch.Message{TaskID: done.TaskID})
		if _, err := e.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(string(ref))}); err != nil {
			t.Fatal(err)
		}
		s := handle(t, b.handler())
		if s.PoisonMessages != 1 || s.DeadLettersDeleted != 2 {
			t.Fatalf("summary = %+v, want 1 poison item and 2 deletions", s)
		}
		id := ledger.PoisonID(aws.ToString(out.MessageId))
		r, err := b.l.GetReview(ctx, id)
		if err != nil {
			t.Fatalf("poison review item %s: %v", id, err)
		}
		if r.Reason != ledger.ReviewPoisonMessage || r.ReviewStatus != ledger.ReviewOpen || r.BodyBytes != len(garbage) || len(r.BodySHA256) != 64 {
			t.Fatalf("review = %+v", r)
		}
		if strings.Contains(r.Summary+strings.Join(r.Known, " "), "not a task reference\"") {
			t.Fatalf("the body leaked into the review item: %+v", r)
		}
		testenv.WantReviewCommandsAt(t, r, 1) // its resolve decides its only park
		assertQueueEmpty(t, e, dlq)
		if s.OpenReviews != 1 {
			t.Fatalf("open reviews metric = %d, want 1", s.OpenReviews)
		}
	})
}

func assertQueueEmpty(t *testing.T, e *testenv.Env, url string) {
	t.Helper()
	attrs, err := e.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range attrs.Attributes {
		if v != "0" {
			t.Fatalf("queue attribute %s = %s, want 0", k, v)
		}
	}
}

func TestSchedulerEventsAreAccepted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		tick, err := os.ReadFile("../../events/scheduler-tick.json")
		if err != nil {
			t.Fatal(err)
		}
		var n struct {
			Source     string `json:"source"`
			DetailType string `json:"detail-type"`
			Detail     string `json:"detail"`
		}
		if err := json.Unmarshal(tick, &n); err != nil || n.Source != "aws.scheduler" || n.DetailType != "Scheduled Event" || n.Detail != "{}" {
			t.Fatalf("events/scheduler-tick.json is not a Scheduler default notification: %+v %v", n, err)
		}
		for _, ev := range []string{string(tick), `{}`, `null`, `[]`, `"tick"`, `{"anything":1}`} {
			if _, err := b.handler().Handle(ctx, json.RawMessage(ev)); err != nil {
				t.Fatalf("Handle(%s): %v", ev, err)
			}
		}
	})
}

func TestMetricsPerLiveState(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		create(t, b, "m-1")
		create(t, b, "m-2")
		r := create(t, b, "m-3")
		claim(t, b, r.TaskID)
		b.clock.Advance(10 * time.Second)
		// Before their dispatch deadline the tasks are only watched.
		if s := handle(t, b.handler()); s.LiveTasks[ledger.StateActive] != 0 || s.WatchPending != 3 {
			t.Fatalf("live tasks = %v, watch pending %d; want 0 active and 3 pending", s.LiveTasks, s.WatchPending)
		}
		b.clock.Advance(21 * time.Second)
		s := handle(t, b.handler())
		// Adopted, queued and running share the active partition of by_state.
		if s.LiveTasks[ledger.StateActive] != 3 || s.LiveTasks[ledger.StateUnknown] != 0 || len(s.LiveTasks) != len(ledger.Partitions) || s.WatchPending != 0 {
			t.Fatalf("live tasks = %v, watch pending %d", s.LiveTasks, s.WatchPending)
		}
		if age := s.OldestAgeSeconds[ledger.StateActive]; age < 30.9 || age > 31.1 {
			t.Fatalf("oldest active age = %v s, want 31", age)
		}
		var queued map[string]any
		for _, line := range strings.Split(strings.TrimSpace(b.emf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("EMF line %q: %v", line, err)
			}
			if m["State"] == "active" {
				queued = m
			}
		}
		if queued == nil || queued["LiveTasks"] != 3.0 || queued["OldestTaskAge"] != 31.0 {
			t.Fatalf("active EMF record = %v", queued)
		}
	})
}

// TestReadsIndependentOfHistory shows that a run's DynamoDB reads do not
// grow with completed tasks: the same live tasks with few or many
// completed ones cost the same Query and GetItem calls — at the deployed
// shard count.
func TestReadsIndependentOfHistory(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		many := 1000
		if e.Backend == "kumo" && !testing.Short() {
			many = 10000
		}
		reads := map[int]map[string]int{}
		for _, completed := range []int{10, many} {
			env := testenv.New(t, e.Backend)
			b := setupShards(t, env, ledger.DefaultShards)
			b.clock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) // same ids, same times
			fillCompleted(t, b, completed)
			// The same few live tasks: a lost send, an expired lease, a
			// fresh queued task and a running one.
			create(t, b, "live-lost")
			lease := create(t, b, "live-lease")
			claim(t, b, lease.TaskID)
			b.clock.Advance(ledger.DefaultDispatchTimeout + 10*time.Second) // past the lease and its grace
			create(t, b, "live-fresh")
			running := create(t, b, "live-running")
			claim(t, b, running.TaskID)
			env.Counter.Reset()
			s := handle(t, b.handler())
			if s.Resent != 1 || s.Requeued != 1 || s.Examined != 2 {
				t.Fatalf("%d completed: summary = %+v", completed, s)
			}
			calls := env.Counter.Calls()
			reads[completed] = map[string]int{"Query": calls["DynamoDB.Query"], "GetItem": calls["DynamoDB.GetItem"]}
		}
		t.Logf("%s: reads with 10 completed = %v, with %d completed = %v", e.Backend, reads[10], many, reads[many])
		if reads[10]["Query"] != reads[many]["Query"] || reads[10]["GetItem"] != reads[many]["GetItem"] || reads[10]["Query"] == 0 {
			t.Fatalf("reads grew with history: 10 → %v, %d → %v", reads[10], many, reads[many])
		}
	})
}

// fillCompleted adds n completed tasks: one through the ledger, and n-1
// copies of its stored item under other ids (BatchWriteItem; creating
// thousands through Create/Claim/Complete takes minutes on moto). The
// copies are exactly what the ledger leaves behind for a completed task.
func fillCompleted(t *testing.T, b *bundle, n int) {
	t.Helper()
	task, err := b.l.Create(ctx, ledger.NewTask{Scope: "history", IdempotencyKey: "done-0", Kind: "generate", Input: `{"prompt":"x"}`, PayloadSHA256: "done"})
	if err == nil {
		task, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
	}
	if err == nil {
		_, err = b.l.Complete(ctx, task.TaskID, task.AssignmentVersion, ledger.Completion{Result: `{"text":"done"}`})
	}
	if err != nil {
		t.Fatalf("complete a task: %v", err)
	}
	table := b.env.Names.TasksTable
	raw, err := b.env.DDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]ddbtypes.AttributeValue{"task_id": &ddbtypes.AttributeValueMemberS{Value: task.TaskID}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, indexed := raw.Item["state_shard"]; indexed {
		t.Fatal("a completed task still carries state_shard")
	}
	var batches [][]ddbtypes.WriteRequest
	var batch []ddbtypes.WriteRequest
	for i := 1; i < n; i++ {
		key := "done-" + strconv.Itoa(i)
		item := make(map[string]ddbtypes.AttributeValue, len(raw.Item))
		for k, v := range raw.Item {
			item[k] = v
		}
		item["task_id"] = &ddbtypes.AttributeValueMemberS{Value: ledger.TaskID("history", key)}
		item["idempotency_key"] = &ddbtypes.AttributeValueMemberS{Value: key}
		batch = append(batch, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
		if len(batch) == 25 || i == n-1 {
			batches = append(batches, batch)
			batch = nil
		}
	}
	const workers = 8
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(batches); i += workers {
				reqs := map[string][]ddbtypes.WriteRequest{table: batches[i]}
				for len(reqs[table]) > 0 {
					out, err := b.env.DDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: reqs})
					if err != nil {
						errc <- err
						return
					}
					reqs = out.UnprocessedItems
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatalf("fill completed: %v", err)
	}
}

func TestBoundedRunsResumeWhereTheyStopped(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		want := map[string]bool{}
		for i := range 5 {
			want[create(t, b, "bounded-"+strconv.Itoa(i)).TaskID] = true
		}
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)

		starved := b.handler()
		starved.Budget = time.Nanosecond
		if s, err := starved.Handle(ctx, nil); err != nil || !s.Partial || s.Examined != 0 {
			t.Fatalf("a run with no time budget: %+v %v", s, err)
		}

		total := 0
		for run := 1; run <= 3; run++ {
			h := b.handler()
			h.MaxPerRun = 2
			s := handle(t, h)
			total += s.Resent
			if wantPartial := run < 3; s.Partial != wantPartial || s.Resent != min(2, 5-2*(run-1)) {
				t.Fatalf("run %d: %+v", run, s)
			}
		}
		ids := e.DrainTaskIDs(t, e.Names.TaskQueueURL)
		got := map[string]bool{}
		for _, id := range ids {
			got[id] = true
		}
		if total != 5 || len(ids) != 5 || len(got) != 5 {
			t.Fatalf("re-sent %d, queue %v; want each of the 5 tasks once", total, ids)
		}
		for id := range want {
			if !got[id] {
				t.Fatalf("task %s was never re-sent", id)
			}
		}
	})
}

// HandleTask applies the rules to the one task it names, and only once
// the task is due: a live lease is left alone (counted raced), an expired
// one is moved on, and the other due tasks are not touched.
func TestHandleTaskMovesOnlyTheNamedDueTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, simulated.Options{NoIdempotency: true, NoReadback: true})
		task := create(t, b, "one-1")
		other := create(t, b, "one-2")
		c := claim(t, b, task.TaskID)
		markCall(t, b, c)
		markCall(t, b, claim(t, b, other.TaskID))
		h := b.handler()

		s, err := h.HandleTask(ctx, task.TaskID)
		if err != nil || s.Raced != 1 || s.ExpiredToUnknown != 0 {
			t.Fatalf("live lease: summary %+v, err %v; want it left alone (raced)", s, err)
		}
		if got := get(t, b, task.TaskID); got.State != ledger.StateRunning {
			t.Fatalf("live lease: state %s, want running", got.State)
		}

		b.clock.Advance(time.Minute)
		s, err = h.HandleTask(ctx, task.TaskID)
		if err != nil || s.Examined != 1 || s.ExpiredToUnknown != 1 {
			t.Fatalf("expired lease: summary %+v, err %v; want it moved to unknown", s, err)
		}
		if got := get(t, b, task.TaskID); got.State != ledger.StateUnknown || got.AssignmentVersion != c.AssignmentVersion {
			t.Fatalf("expired lease: %s at version %d, want unknown at %d", got.State, got.AssignmentVersion, c.AssignmentVersion)
		}
		if got := get(t, b, other.TaskID); got.State != ledger.StateRunning {
			t.Fatalf("the task not named is %s, want running (untouched)", got.State)
		}
		if _, err := h.HandleTask(ctx, ""); err == nil {
			t.Fatal("HandleTask without a task id: no error")
		}
	})
}

// startLongCall starts task's provider call as its worker would, one that
// runs on (simulated.Long), and returns once the provider has it; the
// channel gets the call's error when it ends.
func startLongCall(t *testing.T, b *bundle, task *ledger.Task) <-chan error {
	t.Helper()
	b.prov.Script(task.TaskID, simulated.Long)
	done := make(chan error, 1)
	go func() {
		_, err := b.prov.Generate(ctx, contract.Request{OperationID: task.TaskID, Attempt: 1, Kind: task.Kind, Input: json.RawMessage(task.Input)})
		done <- err
	}()
	for len(b.prov.Events(task.TaskID)) == 0 { // await the call's start at the provider
		time.Sleep(5 * time.Millisecond)
	}
	return done
}
