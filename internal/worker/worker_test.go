package worker_test

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestHappyPathBatch sends the sample batch's task references to the real
// queue, receives them, and runs them as one batch: every task completes
// with its receipt, one provider side effect each, and exactly one claim
// and one completion per task (no extra read).
func TestHappyPathBatch(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		sample := loadEvent(t, "sqs-batch.json")
		const secret = "the-private-prompt-text-7431"
		var ids []string
		for i, rec := range sample.Records {
			key := []string{"sample-batch-1", "sample-batch-2", "sample-batch-3"}[i]
			task := b.create(t, key, `{"prompt":"`+secret+`"}`)
			msg, err := dispatch.Parse(rec.Body)
			if err != nil || msg.TaskID != task.TaskID {
				t.Fatalf("sample record %d names %q (%v); the task for key %s is %s", i, msg.TaskID, err, key, task.TaskID)
			}
			ids = append(ids, task.TaskID)
			// Send with the sample's attributes: the emulator's MD5s must
			// agree with the sample's, so the sample is a real SQS record.
			attrs := map[string]sqstypes.MessageAttributeValue{}
			for k, v := range rec.MessageAttributes {
				attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String(v.DataType), StringValue: v.StringValue}
			}
			out := b.sendBody(t, rec.Body, attrs)
			if got := aws.ToString(out.MD5OfMessageBody); got != rec.Md5OfBody {
				t.Errorf("record %d: md5OfBody %s in the sample, %s from SQS", i, rec.Md5OfBody, got)
			}
			// (kumo does not return MD5OfMessageAttributes; moto does.)
			if got := aws.ToString(out.MD5OfMessageAttributes); got != rec.Md5OfMessageAttributes && !(got == "" && e.Backend == "kumo") {
				t.Errorf("record %d: md5OfMessageAttributes %s in the sample, %s from SQS", i, rec.Md5OfMessageAttributes, got)
			}
		}
		ev := b.event(t, sample, b.receive(t, len(ids), 60))
		for _, rec := range ev.Records {
			if rec.MessageAttributes[dispatch.CorrelationAttribute].StringValue == nil {
				t.Fatalf("record %s lost its correlation id attribute", rec.MessageId)
			}
		}

		e.Counter.Reset()
		wantNoFailures(t, handle(t, b.h, ctx, ev))
		calls := e.Counter.Calls()

		for _, id := range ids {
			task := b.get(t, id)
			wantState(t, task, ledger.StateCompleted)
			rec, ok := b.sim.Record(id)
			if !ok || task.Result != string(rec.Result.Output) {
				t.Errorf("task %s result %q, provider recorded %q", id, task.Result, rec.Result.Output)
			}
			if task.Provider != simulated.Name || task.ProviderRef == "" || task.ProviderRef != rec.Result.ProviderRef ||
				task.CompletedAt == "" || task.ExpiresAt == 0 {
				t.Errorf("task %s receipt: provider %q ref %q (want %q) completed_at %q expires_at %d",
					id, task.Provider, task.ProviderRef, rec.Result.ProviderRef, task.CompletedAt, task.ExpiresAt)
			}
			if task.AssignmentVersion != 1 || task.Attempts != 1 || task.LeaseOwner != "" || task.StateShard != "" {
				t.Errorf("task %s: version %d attempts %d owner %q shard %q", id, task.AssignmentVersion, task.Attempts, task.LeaseOwner, task.StateShard)
			}
			if n := b.sim.SideEffects(id); n != 1 {
				t.Errorf("task %s: %d provider side effects, want 1", id, n)
			}
		}
		if calls["DynamoDB.UpdateItem"] != 2*len(ids) || calls["DynamoDB.GetItem"] != 0 || calls["SQS.ChangeMessageVisibility"] != 0 {
			t.Errorf("AWS calls %v; want %d UpdateItem (claim + complete per task) and nothing else", calls, 2*len(ids))
		}
		if strings.Contains(b.logs.String(), secret) {
			t.Error("the logs contain the task's prompt")
		}
		m := emf(t, b)
		if sum(m, "Completed") != len(ids) || sum(m, "Records") != len(ids) || sum(m, "ItemFailures") != 0 {
			t.Errorf("batch metrics %v", m)
		}
	})
}

// TestDuplicateDelivery: the sample duplicate (one task, two messages) in one
// batch makes one provider call; a later re-delivery of the completed task
// makes none.
func TestDuplicateDelivery(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		sample := loadEvent(t, "sqs-duplicate.json")
		task := b.create(t, "sample-duplicate-1", prompt)
		for _, rec := range sample.Records {
			if m, err := dispatch.Parse(rec.Body); err != nil || m.TaskID != task.TaskID {
				t.Fatalf("sample duplicate names %q (%v), want %s", m.TaskID, err, task.TaskID)
			}
			b.send(t, task.TaskID)
		}
		ev := b.event(t, sample, b.receive(t, 2, 60))
		wantNoFailures(t, handle(t, b.h, ctx, ev))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		if c := b.sim.Calls(task.TaskID); c != 1 {
			t.Fatalf("%d provider calls for a task delivered twice in one batch, want 1", c)
		}

		// Redelivery after completion: one refused claim, no provider call.
		b.send(t, task.TaskID)
		ev = b.event(t, sample, b.receive(t, 1, 60))
		e.Counter.Reset()
		wantNoFailures(t, handle(t, b.h, ctx, ev))
		calls := e.Counter.Calls()
		if c := b.sim.Calls(task.TaskID); c != 1 {
			t.Fatalf("a duplicate delivery of a completed task called the provider (%d calls)", c)
		}
		if calls["DynamoDB.UpdateItem"] != 1 {
			t.Errorf("AWS calls for a duplicate: %v, want one (refused) claim", calls)
		}
		got := b.get(t, task.TaskID)
		if got.AssignmentVersion != 1 || got.Attempts != 1 {
			t.Errorf("duplicate changed the task: version %d attempts %d", got.AssignmentVersion, got.Attempts)
		}
		if n := sum(emf(t, b), "AckedDuplicate"); n != 2 {
			t.Errorf("AckedDuplicate = %d, want 2 (one in the batch, one redelivery)", n)
		}
	})
}

// TestPausedWorkerIsFenced: worker A stalls inside the provider past its
// lease; worker B takes the task over and completes it. A's heartbeat is
// fenced, its provider context cancelled with ErrFenced, it saves nothing,
// and the provider performed the operation once.
func TestPausedWorkerIsFenced(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		const lease = 3 * time.Second
		// A's clock stands still, so its renewals never push the lease past
		// B's clock: the takeover does not race A's heartbeat.
		clockA := testenv.NewClock(b.clock.Now())
		gA := newGate(b.sim)
		hA := b.handler(newLedger(t, e, clockA, ""), gA)
		hA.Lease = lease
		hB := b.handler(b.l, b.sim)
		hB.Lease = lease

		task := b.create(t, "paused", prompt)
		b.send(t, task.TaskID)
		b.send(t, task.TaskID) // a second copy, as the outbox relay would send
		msgs := b.receive(t, 2, 60)
		evA := b.event(t, loadEvent(t, "sqs-batch.json"), msgs[:1])
		evB := b.event(t, loadEvent(t, "sqs-batch.json"), msgs[1:])

		doneA := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := hA.Handle(ctx, evA); doneA <- resp }()
		gA.waitStarted(t)

		b.clock.Advance(lease + time.Second) // A's lease has expired for B
		wantNoFailures(t, handle(t, hB, ctx, evB))
		after := b.get(t, task.TaskID)
		wantState(t, after, ledger.StateCompleted)

		respA := await(t, doneA)
		wantNoFailures(t, respA) // fenced: acknowledged, someone else owns it
		if cause := gA.Cause(); !errors.Is(cause, worker.ErrFenced) {
			t.Fatalf("A's provider context ended with %v, want ErrFenced", cause)
		}
		final := b.get(t, task.TaskID)
		if final.Result != after.Result || final.AssignmentVersion != 2 || final.UpdatedMs != after.UpdatedMs {
			t.Fatalf("the stale worker changed the task: version %d→%d", after.AssignmentVersion, final.AssignmentVersion)
		}
		if b.sim.SideEffects(task.TaskID) != 1 || b.sim.TotalSideEffects() != 1 {
			t.Fatalf("provider side effects %d (total %d), want 1", b.sim.SideEffects(task.TaskID), b.sim.TotalSideEffects())
		}
		if !strings.Contains(b.logs.String(), "heartbeat fenced") {
			t.Error("A did not log its fenced heartbeat")
		}
	})
}

// TestLateResultCannotOverwrite: a stale worker whose provider ignores
// cancellation comes back with its own result after another worker
// completed the task: its completion is fenced and the saved result stays.
func TestLateResultCannotOverwrite(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		clockA := testenv.NewClock(b.clock.Now())
		gA := newGate(b.sim)
		gA.ignoreCtx = true
		gA.late = &contract.Result{Output: []byte(`{"text":"late and stale"}`), Provider: "simulated", ProviderRef: "late-ref"}
		hA := b.handler(newLedger(t, e, clockA, ""), gA) // Lease 30s: no heartbeat during the test

		task := b.create(t, "late", prompt)
		b.send(t, task.TaskID)
		b.send(t, task.TaskID)
		msgs := b.receive(t, 2, 60)
		evA := b.event(t, loadEvent(t, "sqs-batch.json"), msgs[:1])
		doneA := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := hA.Handle(ctx, evA); doneA <- resp }()
		gA.waitStarted(t)

		b.clock.Advance(31 * time.Second)
		wantNoFailures(t, handle(t, b.h, ctx, b.event(t, loadEvent(t, "sqs-batch.json"), msgs[1:])))
		saved := b.get(t, task.TaskID)
		wantState(t, saved, ledger.StateCompleted)

		close(gA.release)
		wantNoFailures(t, await(t, doneA))
		final := b.get(t, task.TaskID)
		if final.Result != saved.Result || strings.Contains(final.Result, "stale") || final.ProviderRef != saved.ProviderRef {
			t.Fatalf("the late result replaced the saved one: %q", final.ProviderRef)
		}
		if !strings.Contains(b.logs.String(), `"why":"taken_over"`) {
			t.Errorf("the rejected completion was not explained in the logs:\n%s", b.logs.String())
		}
		if b.sim.TotalSideEffects() != 1 {
			t.Fatalf("provider side effects %d, want 1", b.sim.TotalSideEffects())
		}
	})
}

// TestHeartbeatKeepsMessageInvisible: the queue hides a received message for
// 3s, the provider works for twice that; the heartbeat (lease 3s, every 1s)
// keeps extending the visibility, so nobody receives it meanwhile. The
// first extension comes after the claim, a tick and a renewal, three
// writes' latency: a loaded moto took more than a 2s visibility's slack.
func TestHeartbeatKeepsMessageInvisible(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		g := newGate(b.sim)
		h := b.handler(b.l, g)
		h.Lease = 3 * time.Second

		task := b.create(t, "heartbeat", prompt)
		b.send(t, task.TaskID)
		received := time.Now()
		ev := b.event(t, loadEvent(t, "sqs-batch.json"), b.receive(t, 1, 3))
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := h.Handle(ctx, ev); done <- resp }()
		g.waitStarted(t)

		// Poll until well past the 3s visibility the message was received with.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for time.Since(received) < 6*time.Second {
			if msgs := b.poll(t, 1, 2); len(msgs) > 0 {
				close(g.release)
				t.Fatalf("message redelivered %v after receipt while the worker was still running", time.Since(received))
			}
			<-tick.C
		}
		close(g.release)
		wantNoFailures(t, await(t, done))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)

		beats := 0
		for _, c := range b.sqs.Calls() {
			if c.receipt == ev.Records[0].ReceiptHandle && c.secs == 6 {
				beats++
			}
		}
		if beats < 3 {
			t.Fatalf("%d visibility extensions to 6s (2×lease), want at least 3 in 6s: %v\n%s", beats, b.sqs.Calls(), b.logs.String())
		}
		if n := b.sim.SideEffects(task.TaskID); n != 1 {
			t.Fatalf("%d side effects, want 1", n)
		}
	})
}

// TestTransientRetryThenComplete: a 429 with Retry-After 2s puts the task in
// retry_wait with not_before, reports an item failure and delays the
// message by 2s; a delivery before not_before is delayed again; the one
// after completes.
func TestTransientRetryThenComplete(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{ThrottleRetryAfter: 2 * time.Second}))
		ctx := context.Background()
		task := b.create(t, "transient", prompt)
		b.sim.Script(task.TaskID, simulated.Throttle)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		msgID, receipt := ev.Records[0].MessageId, ev.Records[0].ReceiptHandle

		start := b.clock.Now()
		wantFailures(t, handle(t, b.h, ctx, ev), msgID)
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateRetryWait)
		nb := time.UnixMilli(got.NotBefore)
		if nb.Before(start.Add(2*time.Second)) || nb.After(start.Add(2*time.Second+100*time.Millisecond)) {
			t.Fatalf("not_before %v after now, want Retry-After 2s (+ at most the 50ms backoff cap)", nb.Sub(start))
		}
		if got.ErrorClass != "transient" || !strings.Contains(got.ErrorMessage, "429") {
			t.Fatalf("error %s: %s", got.ErrorClass, got.ErrorMessage)
		}
		if calls := b.sqs.Calls(); len(calls) != 1 || calls[0].receipt != receipt || calls[0].secs != 2 {
			t.Fatalf("visibility changes %v, want one to 2s", calls)
		}
		if msgs := b.poll(t, 1, 60); len(msgs) != 0 {
			t.Fatal("the message is visible right after the retry was scheduled")
		}

		// The same delivery again before not_before: delayed, no provider call.
		wantFailures(t, handle(t, b.h, ctx, ev), msgID)
		if c := b.sim.Calls(task.TaskID); c != 1 {
			t.Fatalf("a delivery before not_before called the provider (%d calls)", c)
		}
		if calls := b.sqs.Calls(); len(calls) != 2 || calls[1].secs < 1 || calls[1].secs > 2 {
			t.Fatalf("not-due delivery: visibility changes %v, want the remaining ≤2s", calls)
		}

		// After the backoff the message comes back and the task completes.
		b.clock.Advance(3 * time.Second)
		again := b.deliver(t, 1, 60)
		if again.Records[0].MessageId != msgID {
			t.Fatalf("redelivered message %s, want %s", again.Records[0].MessageId, msgID)
		}
		wantNoFailures(t, handle(t, b.h, ctx, again))
		got = b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if got.Attempts != 2 || b.sim.SideEffects(task.TaskID) != 1 || b.sim.Calls(task.TaskID) != 2 {
			t.Fatalf("attempts %d, side effects %d, calls %d; want 2, 1, 2", got.Attempts, b.sim.SideEffects(task.TaskID), b.sim.Calls(task.TaskID))
		}
		if sum(emf(t, b), "Retried") != 1 {
			t.Errorf("Retried metric: %v", emf(t, b))
		}
	})
}

// TestPermanentInputFails: a 400 from the provider and an input the schema
// rejects both end failed, with the class and a message for the caller.
func TestPermanentInputFails(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		rejected := b.create(t, "bad-request", prompt)
		b.sim.Script(rejected.TaskID, simulated.BadRequest)
		invalid := b.create(t, "invalid-input", `{"prompt":"x","max_tokens":100000}`)
		b.send(t, rejected.TaskID)
		b.send(t, invalid.TaskID)

		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 2, 60)))
		for id, want := range map[string]string{rejected.TaskID: "400", invalid.TaskID: "max_tokens"} {
			got := b.get(t, id)
			wantState(t, got, ledger.StateFailed)
			if got.ErrorClass != "permanent_input" || !strings.Contains(got.ErrorMessage, want) || got.Result != "" || got.ExpiresAt == 0 {
				t.Errorf("task %s: error %q %q (want one mentioning %s), result %q", id, got.ErrorClass, got.ErrorMessage, want, got.Result)
			}
		}
		if strings.Contains(b.get(t, invalid.TaskID).ErrorMessage, "100000") {
			t.Error("the error message echoes the input")
		}
		if sum(emf(t, b), "Failed") != 2 {
			t.Errorf("Failed metric: %v", emf(t, b))
		}
	})
}

// TestCredentialFailureParked: a 401 parks the task with a specific,
// actionable review item and acknowledges the message.
func TestCredentialFailureParked(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := b.create(t, "credentials", prompt)
		b.sim.Script(task.TaskID, simulated.Credentials)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))

		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if got.ReviewReason != ledger.ReviewProviderConfig || got.ErrorClass != "permanent_config" {
			t.Fatalf("task review reason %q error class %q", got.ReviewReason, got.ErrorClass)
		}
		r, err := b.l.GetReview(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if r.ReviewStatus != ledger.ReviewOpen || r.Reason != ledger.ReviewProviderConfig || r.Attempts != 1 ||
			!strings.Contains(r.Summary, "HTTP 401") || !strings.Contains(r.Summary, "no result was produced") {
			t.Fatalf("review %+v", r)
		}
		if len(r.Known) == 0 || len(r.Uncertain) == 0 || len(r.SafeActions) < 2 ||
			!strings.Contains(r.SafeActions[0], "fix the provider credentials") || r.CorrelationID != "corr-credentials" {
			t.Fatalf("review is not actionable: %+v", r)
		}
		if sum(emf(t, b), "Parked") != 1 {
			t.Errorf("Parked metric: %v", emf(t, b))
		}
	})
}

// TestAcceptThenLoseReply: the provider performs the generation and the
// reply is lost. With a provider that deduplicates by operation id the next
// attempt completes from its idempotency ledger; without, the task goes to
// unknown for readback. Never two side effects.
func TestAcceptThenLoseReply(t *testing.T) {
	t.Parallel()
	t.Run("Idempotent", func(t *testing.T) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			b := setup(t, e)
			ctx := context.Background()
			task := b.create(t, "lose-reply", prompt)
			b.sim.Script(task.TaskID, simulated.AcceptLoseReply)
			b.send(t, task.TaskID)
			ev := b.deliver(t, 1, 60)
			wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
			got := b.get(t, task.TaskID)
			wantState(t, got, ledger.StateRetryWait)
			if got.ErrorClass != "unknown_outcome" || b.sim.SideEffects(task.TaskID) != 1 {
				t.Fatalf("after the lost reply: error class %q, side effects %d", got.ErrorClass, b.sim.SideEffects(task.TaskID))
			}

			b.clock.Advance(time.Second)
			wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
			got = b.get(t, task.TaskID)
			wantState(t, got, ledger.StateCompleted)
			rec, _ := b.sim.Record(task.TaskID)
			if got.Result != string(rec.Result.Output) || got.ProviderRef != rec.Result.ProviderRef {
				t.Fatalf("saved result is not the one the provider recorded")
			}
			if b.sim.TotalSideEffects() != 1 || b.sim.Calls(task.TaskID) != 2 {
				t.Fatalf("side effects %d calls %d; want 1 and 2", b.sim.TotalSideEffects(), b.sim.Calls(task.TaskID))
			}
		})
	})
	t.Run("NotIdempotent", func(t *testing.T) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			b := setup(t, e, withSim(simulated.Options{NoIdempotency: true}))
			ctx := context.Background()
			task := b.create(t, "lose-reply", prompt)
			b.sim.Script(task.TaskID, simulated.AcceptLoseReply)
			b.send(t, task.TaskID)
			b.send(t, task.TaskID)
			msgs := b.receive(t, 2, 60)
			wantNoFailures(t, handle(t, b.h, ctx, b.event(t, loadEvent(t, "sqs-batch.json"), msgs[:1])))
			got := b.get(t, task.TaskID)
			wantState(t, got, ledger.StateUnknown)
			if got.Result != "" || got.ErrorClass != "unknown_outcome" {
				t.Fatalf("unknown task: result %q error class %q", got.Result, got.ErrorClass)
			}
			// A second delivery must not re-send: the reconciler reads back.
			wantNoFailures(t, handle(t, b.h, ctx, b.event(t, loadEvent(t, "sqs-batch.json"), msgs[1:])))
			if b.sim.TotalSideEffects() != 1 || b.sim.Calls(task.TaskID) != 1 {
				t.Fatalf("side effects %d calls %d; want 1 and 1", b.sim.TotalSideEffects(), b.sim.Calls(task.TaskID))
			}
			if sum(emf(t, b), "Unknown") != 1 {
				t.Errorf("Unknown metric: %v", emf(t, b))
			}
		})
	})
}

// TestPoisonMessage: bodies that are not task references go to the review
// table and are acknowledged; if that write fails, the record is retried.
func TestPoisonMessage(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		sample := loadEvent(t, "sqs-poison.json")
		for _, rec := range sample.Records {
			if _, err := dispatch.Parse(rec.Body); !errors.Is(err, dispatch.ErrPoison) {
				t.Fatalf("sample poison body parses: %v", err)
			}
			b.sendBody(t, rec.Body, nil)
		}
		ev := b.event(t, sample, b.receive(t, len(sample.Records), 60))

		// The review table is missing: nothing recorded, so nothing acked.
		broken := b.handler(newLedger(t, e, b.clock, e.Names.ReviewTable+"-missing"), b.sim)
		var all []string
		for _, r := range ev.Records {
			all = append(all, r.MessageId)
		}
		wantFailures(t, handle(t, broken, ctx, ev), all...)

		wantNoFailures(t, handle(t, b.h, ctx, ev))
		for _, rec := range ev.Records {
			r, err := b.l.GetReview(ctx, ledger.PoisonID(rec.MessageId))
			if err != nil {
				t.Fatalf("no review item for poison message %s: %v", rec.MessageId, err)
			}
			digest := sha256.Sum256([]byte(rec.Body))
			if r.Reason != ledger.ReviewPoisonMessage || r.ReviewStatus != ledger.ReviewOpen || r.MessageID != rec.MessageId ||
				r.BodySHA256 != hex.EncodeToString(digest[:]) || r.BodyBytes != len(rec.Body) || r.Summary == "" ||
				len(r.Known) == 0 || len(r.SafeActions) == 0 {
				t.Fatalf("poison review %+v", r)
			}
			for _, s := range append(append([]string{r.Summary}, r.Known...), r.ErrorMessage) {
				if strings.Contains(s, rec.Body) {
					t.Fatalf("the review item stores the body: %q", s)
				}
			}
		}
		if b.sim.TotalSideEffects() != 0 {
			t.Fatal("a poison message reached the provider")
		}
		if sum(emf(t, b), "Poison") != len(ev.Records) {
			t.Errorf("Poison metric: %v", emf(t, b))
		}
	})
}

// TestBudgetExhausted: a failure with no attempt left, a retry that would
// start after the age budget, and a delivery after the age budget all park
// the task (budget_exhausted) instead of looping.
func TestBudgetExhausted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withSim(simulated.Options{ThrottleRetryAfter: 30 * time.Second}))
		ctx := context.Background()
		lastAttempt := b.create(t, "last-attempt", prompt, func(n *ledger.NewTask) { n.MaxAttempts = 1 })
		b.sim.Script(lastAttempt.TaskID, simulated.ServerError)
		tooLate := b.create(t, "too-late", prompt, func(n *ledger.NewTask) { n.MaxAge = 10 * time.Second })
		b.sim.Script(tooLate.TaskID, simulated.Throttle)
		b.send(t, lastAttempt.TaskID)
		b.send(t, tooLate.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 2, 60)))

		for id, budget := range map[string]string{lastAttempt.TaskID: "max_attempts", tooLate.TaskID: "max_age"} {
			got := b.get(t, id)
			wantState(t, got, ledger.StateNeedsReview)
			r, err := b.l.GetReview(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Reason != ledger.ReviewBudgetExhausted || r.ErrorClass != "transient" || !containsAny(r.Known, budget) ||
				len(r.SafeActions) != 2 || r.Summary == "" {
				t.Fatalf("task %s review %+v, want budget_exhausted (%s)", id, r, budget)
			}
		}
		if !strings.Contains(mustReview(t, b, lastAttempt.TaskID).Summary, "used 1 of 1 attempts without a result") {
			t.Errorf("summary %q", mustReview(t, b, lastAttempt.TaskID).Summary)
		}

		// Past its age budget before any attempt: parked at the claim, no
		// provider call.
		old := b.create(t, "old", prompt, func(n *ledger.NewTask) { n.MaxAge = time.Minute })
		b.clock.Advance(2 * time.Minute)
		b.send(t, old.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		wantState(t, b.get(t, old.TaskID), ledger.StateNeedsReview)
		if r := mustReview(t, b, old.TaskID); r.Reason != ledger.ReviewBudgetExhausted || !containsAny(r.Known, "max_age") {
			t.Fatalf("review %+v", r)
		}
		if b.sim.Calls(old.TaskID) != 0 {
			t.Fatal("an expired task reached the provider")
		}
	})
}

func mustReview(t *testing.T, b *bundle, id string) *ledger.Review {
	t.Helper()
	r, err := b.l.GetReview(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func containsAny(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestDeadlineMargin: no provider call starts unless it can run its whole
// call timeout before work stops (DeadlineMargin before the invocation's
// deadline). A record turned away before its claim is left untouched; one
// whose claim ate the time is released with its attempt given back; a call
// that runs past its call timeout is uncertain, never failed. Nothing is
// saved for any of them.
func TestDeadlineMargin(t *testing.T) {
	t.Parallel()
	const margin = time.Second
	t.Run("CallTimeout", func(t *testing.T) {
		for _, idem := range []bool{true, false} {
			name := map[bool]string{true: "Idempotent", false: "NotIdempotent"}[idem]
			t.Run(name, func(t *testing.T) {
				testenv.Each(t, func(t *testing.T, e *testenv.Env) {
					const callTimeout = 300 * time.Millisecond
					b := setup(t, e, withSim(simulated.Options{SlowDelay: time.Minute, NoIdempotency: !idem}),
						withHandler(func(h *worker.Handler) { h.DeadlineMargin = margin; h.CallTimeout = callTimeout }))
					task := b.create(t, "slow", prompt)
					b.sim.Script(task.TaskID, simulated.Slow)
					b.send(t, task.TaskID)
					ev := b.deliver(t, 1, 60)

					// The invocation has a minute: a call its call timeout did
					// not bound would run until work stops, twice the limit
					// below, which leaves room for writes to a loaded emulator.
					ctx, cancel := context.WithTimeout(context.Background(), margin+time.Minute)
					defer cancel()
					start := time.Now()
					resp := handle(t, b.h, ctx, ev)
					if took := time.Since(start); took > 30*time.Second {
						t.Errorf("Handle took %v: the %v call timeout did not bound the call", took, callTimeout)
					}
					got := b.get(t, task.TaskID)
					if idem {
						// Safe to re-send under the same key: a retry, reported.
						wantFailures(t, resp, ev.Records[0].MessageId)
						wantState(t, got, ledger.StateRetryWait)
					} else {
						// Left to the reconciler's readback: acknowledged.
						wantNoFailures(t, resp)
						wantState(t, got, ledger.StateUnknown)
					}
					if got.Result != "" || got.ErrorClass != "unknown_outcome" || b.sim.TotalSideEffects() != 0 || b.sim.Calls(task.TaskID) != 1 {
						t.Fatalf("result %q error class %q side effects %d calls %d", got.Result, got.ErrorClass, b.sim.TotalSideEffects(), b.sim.Calls(task.TaskID))
					}
					if !strings.Contains(got.ErrorMessage, "call timeout") {
						t.Errorf("error message %q does not say the call timeout ended the call", got.ErrorMessage)
					}
				})
			})
		}
	})
	t.Run("BeforeClaim", func(t *testing.T) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			b := setup(t, e, withHandler(func(h *worker.Handler) { h.DeadlineMargin = margin }))
			task := b.create(t, "no-time", prompt)
			b.send(t, task.TaskID)
			ev := b.deliver(t, 1, 60)
			ctx, cancel := context.WithTimeout(context.Background(), margin/2)
			defer cancel()
			wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
			got := b.get(t, task.TaskID)
			wantState(t, got, ledger.StateQueued)
			if got.Attempts != 0 || b.sim.Calls(task.TaskID) != 0 {
				t.Fatalf("attempts %d calls %d, want untouched", got.Attempts, b.sim.Calls(task.TaskID))
			}
			// Made visible again at once for another invocation.
			if again := b.receive(t, 1, 60); len(again) != 1 {
				t.Fatal("the unstarted message did not become visible again")
			}
		})
	})
	t.Run("NotAdmitted", func(t *testing.T) {
		// Work has seconds left, but less than the provider's call timeout.
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			b := setup(t, e, withSim(simulated.Options{CallTimeout: time.Minute}),
				withHandler(func(h *worker.Handler) { h.DeadlineMargin = margin }))
			task := b.create(t, "not-admitted", prompt)
			b.send(t, task.TaskID)
			ev := b.deliver(t, 1, 60)
			ctx, cancel := context.WithTimeout(context.Background(), margin+20*time.Second)
			defer cancel()
			wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
			got := b.get(t, task.TaskID)
			wantState(t, got, ledger.StateQueued)
			if got.Attempts != 0 || got.AssignmentVersion != 0 || b.sim.Calls(task.TaskID) != 0 {
				t.Fatalf("attempts %d version %d calls %d, want untouched (no claim)", got.Attempts, got.AssignmentVersion, b.sim.Calls(task.TaskID))
			}
			if again := b.receive(t, 1, 1); len(again) != 1 {
				t.Fatal("the record not admitted did not become visible again")
			}
			if !strings.Contains(b.logs.String(), "less time than one provider call needs") {
				t.Errorf("no warning that the invocation cannot fit a call:\n%s", b.logs.String())
			}
			if !strings.Contains(b.metrics.String(), `"NotAdmitted":1`) {
				t.Errorf("batch metrics lack NotAdmitted=1:\n%s", b.metrics.String())
			}
			// The same record with a call timeout that fits is admitted and completes.
			b.h.CallTimeout = 10 * time.Second
			ev = b.deliver(t, 1, 60)
			ctx2, cancel2 := context.WithTimeout(context.Background(), margin+20*time.Second)
			defer cancel2()
			wantNoFailures(t, handle(t, b.h, ctx2, ev))
			wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
		})
	})
	t.Run("AfterClaim", func(t *testing.T) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			b := setup(t, e, withHandler(func(h *worker.Handler) {
				h.DeadlineMargin = margin
				h.CallTimeout = 200 * time.Millisecond
				// The claim "eats the time": the worker pauses after it until the margin is reached.
				h.Hooks = &worker.Hooks{AfterClaim: func(ctx context.Context, _ string) error { <-ctx.Done(); return nil }}
			}))
			task := b.create(t, "released", prompt)
			b.send(t, task.TaskID)
			ev := b.deliver(t, 1, 60)
			ctx, cancel := context.WithTimeout(context.Background(), margin+500*time.Millisecond)
			defer cancel()
			wantFailures(t, handle(t, b.h, ctx, ev), ev.Records[0].MessageId)
			got := b.get(t, task.TaskID)
			wantState(t, got, ledger.StateQueued)
			if got.Attempts != 0 || got.AssignmentVersion != 1 || got.LeaseOwner != "" || got.Result != "" || b.sim.Calls(task.TaskID) != 0 {
				t.Fatalf("released task: attempts %d version %d owner %q calls %d; want the attempt given back",
					got.Attempts, got.AssignmentVersion, got.LeaseOwner, b.sim.Calls(task.TaskID))
			}
		})
	})
}

// TestAdmissionNeverCutsACall: a batch processed in waves (Concurrency <
// batch size) with calls long relative to the invocation. Without
// admission the late waves start calls that the deadline cuts short
// (unknown, an attempt spent); with it every record either completes or is
// handed back untouched. The invocation's time is sized from the slowest
// write the setup saw, so that on a loaded moto the first wave still has
// room for its writes (claim, call-start mark, completion) around its
// call, while five waves never fit.
func TestAdmissionNeverCutsACall(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		const (
			margin      = 3 * time.Second // the give-backs' writes: seconds on a loaded moto
			latency     = time.Second
			callTimeout = 1200 * time.Millisecond
			records     = 10
		)
		b := setup(t, e, withSim(simulated.Options{Latency: latency, NoIdempotency: true}),
			withHandler(func(h *worker.Handler) {
				h.DeadlineMargin = margin
				h.CallTimeout = callTimeout
				h.Concurrency = 2
			}))
		ids := map[string]bool{}
		var writes []time.Duration
		for i := range records {
			began := time.Now()
			task := b.create(t, fmt.Sprintf("wave-%d", i), prompt)
			ids[task.TaskID] = true
			b.send(t, task.TaskID)
			writes = append(writes, time.Since(began))
		}
		ev := b.deliver(t, records, 60)
		work := admissionWork(callTimeout, writes)
		ctx, cancel := context.WithTimeout(context.Background(), margin+work)
		defer cancel()
		handle(t, b.h, ctx, ev)
		completed, untouched := 0, 0
		for id := range ids {
			got := b.get(t, id)
			switch {
			case got.State == ledger.StateCompleted && b.sim.SideEffects(id) == 1:
				completed++
			case got.State == ledger.StateQueued && got.Attempts == 0 && b.sim.Calls(id) == 0:
				untouched++
			default:
				t.Errorf("task %s: state %s attempts %d calls %d error %q: a call was started that could not finish",
					id, got.State, got.Attempts, b.sim.Calls(id), got.ErrorClass)
			}
		}
		if completed == 0 || untouched == 0 {
			t.Errorf("completed %d, handed back %d: want both (the first wave fits, the last cannot)", completed, untouched)
		}
	})
}

// admissionWork sizes TestAdmissionNeverCutsACall's invocation (beyond
// its margin) from the setup's writes (a create and a send each). A wave
// is a call of 1 s and three writes: the first fits in the result, the
// fifth cannot (5 × (1 s + 3 writes) > callTimeout + 6 writes, however
// slow a write).
func admissionWork(callTimeout time.Duration, writes []time.Duration) time.Duration {
	sorted := slices.Sorted(slices.Values(writes))
	return max(3*time.Second, callTimeout+6*sorted[len(sorted)/2])
}

// One stalled setup write (a busy shared moto, a pause of the test
// process) does not size the invocation for five waves of the typical
// writes the handler then sees: the last wave must still not fit.
func TestAdmissionWorkIsNotSizedByOneStalledWrite(t *testing.T) {
	t.Parallel()
	const callTimeout = 1200 * time.Millisecond
	typical := 20 * time.Millisecond
	writes := []time.Duration{800 * time.Millisecond}
	for range 9 {
		writes = append(writes, typical)
	}
	work := admissionWork(callTimeout, writes)
	// The fifth wave is admitted (CallTimeout left) once four waves of a
	// 1 s call and three typical writes are done.
	if fifth := 4 * (time.Second + 3*typical/2); fifth+callTimeout <= work {
		t.Fatalf("work %v admits the fifth wave at %v", work, fifth)
	}
	if first := 2 * typical; first+time.Second > work {
		t.Fatalf("work %v leaves the first wave no room", work)
	}
}

// TestHooksSimulateCrash: a worker that dies after its claim leaves the lease
// to expire and the message to come back; the next worker takes over and
// completes once. A worker that dies after saving leaves a completed task,
// whose redelivery makes no provider call.
func TestHooksSimulateCrash(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-crash"})
		crashed := b.create(t, "crash-after-claim", prompt)
		saved := b.create(t, "crash-after-save", prompt)
		dying := b.handler(b.l, b.sim)
		dying.Hooks = &worker.Hooks{
			AfterClaim: func(_ context.Context, id string) error {
				if id == crashed.TaskID {
					return errDie
				}
				return nil
			},
			AfterSave: func(_ context.Context, id string) error {
				if id == saved.TaskID {
					return errDie
				}
				return nil
			},
		}
		b.send(t, crashed.TaskID)
		b.send(t, saved.TaskID)
		ev := b.deliver(t, 2, 60)
		resp := handle(t, dying, ctx, ev)
		if len(resp.BatchItemFailures) != 2 {
			t.Fatalf("item failures %v, want both records", failedIDs(resp))
		}
		c := b.get(t, crashed.TaskID)
		wantState(t, c, ledger.StateRunning)
		var crashedMsg string
		for _, r := range ev.Records {
			if strings.Contains(r.Body, crashed.TaskID) {
				crashedMsg = r.MessageId
			}
		}
		if c.LeaseOwner != "req-crash/"+crashedMsg {
			t.Errorf("lease owner %q, want the request id and the message id", c.LeaseOwner)
		}
		if !strings.Contains(b.logs.String(), `"request_id":"req-crash"`) {
			t.Error("logs lack the Lambda request id")
		}
		if b.sim.Calls(crashed.TaskID) != 0 {
			t.Fatal("the worker called the provider after dying")
		}
		wantState(t, b.get(t, saved.TaskID), ledger.StateCompleted)

		// Redeliver both after the dead worker's lease expired.
		b.clock.Advance(31 * time.Second)
		wantNoFailures(t, handle(t, b.h, ctx, ev))
		got := b.get(t, crashed.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if got.AssignmentVersion != 2 || b.sim.SideEffects(crashed.TaskID) != 1 {
			t.Fatalf("takeover: version %d side effects %d", got.AssignmentVersion, b.sim.SideEffects(crashed.TaskID))
		}
		if b.sim.Calls(saved.TaskID) != 1 {
			t.Fatalf("the completed task's redelivery called the provider (%d calls)", b.sim.Calls(saved.TaskID))
		}
	})
}

// TestHandlerNeedsDependencies: a misconfigured handler is the one case
// that fails the whole batch.
func TestHandlerNeedsDependencies(t *testing.T) {
	t.Parallel()
	_, err := (&worker.Handler{}).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m"}}})
	if err == nil {
		t.Fatal("a Handler without ledger and provider accepted a batch")
	}
}

// TestConcurrencyBound: with Concurrency 2, a batch of four runs at most two
// provider calls at a time, and every record is accounted for.
func TestConcurrencyBound(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		g := newGate(b.sim)
		h := b.handler(b.l, g)
		h.Concurrency = 2
		var ids []string
		for i := range 4 {
			task := b.create(t, "bound-"+string(rune('a'+i)), prompt)
			ids = append(ids, task.TaskID)
			b.send(t, task.TaskID)
		}
		ev := b.deliver(t, 4, 60)
		done := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := h.Handle(context.Background(), ev); done <- resp }()
		g.waitStarted(t)
		g.waitStarted(t)
		select {
		case <-g.started:
			close(g.release)
			t.Fatal("a third provider call started with Concurrency 2")
		case <-time.After(300 * time.Millisecond):
		}
		close(g.release)
		wantNoFailures(t, await(t, done))
		for _, id := range ids {
			wantState(t, b.get(t, id), ledger.StateCompleted)
		}
	})
}

// TestSampleEvents: the events/ samples are strict events.SQSEvent JSON that
// survives a round trip, with correct body MD5s and the bodies each sample
// is named for.
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqs-batch.json", "sqs-duplicate.json", "sqs-poison.json"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev := loadEvent(t, name)
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			var back events.SQSEvent
			if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, ev) {
				t.Fatalf("round trip changed the event (%v)", err)
			}
			seen := map[string]bool{}
			tasks := map[string]int{}
			for _, r := range ev.Records {
				if sum := md5.Sum([]byte(r.Body)); hex.EncodeToString(sum[:]) != r.Md5OfBody {
					t.Errorf("record %s: md5OfBody does not match its body", r.MessageId)
				}
				if seen[r.MessageId] || r.ReceiptHandle == "" || r.EventSource != "aws:sqs" || !strings.HasPrefix(r.EventSourceARN, "arn:aws:sqs:") {
					t.Errorf("record %s is not a plausible SQS record", r.MessageId)
				}
				seen[r.MessageId] = true
				m, err := dispatch.Parse(r.Body)
				switch {
				case name == "sqs-poison.json" && !errors.Is(err, dispatch.ErrPoison):
					t.Errorf("poison sample %s parses as a task reference", r.MessageId)
				case name != "sqs-poison.json" && err != nil:
					t.Errorf("record %s: %v", r.MessageId, err)
				case err == nil:
					tasks[m.TaskID]++
				}
			}
			if name == "sqs-duplicate.json" && (len(tasks) != 1 || len(ev.Records) != 2) {
				t.Errorf("the duplicate sample names tasks %v, want one task twice", tasks)
			}
			if name == "sqs-batch.json" && len(tasks) != len(ev.Records) {
				t.Errorf("the batch sample names tasks %v, want distinct tasks", tasks)
			}
		})
	}
}
