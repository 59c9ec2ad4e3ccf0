package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// largeInput is a generate input of about n bytes (over the 4 KiB inline
// threshold for n > 4096).
func largeInput(n int) string {
	b, _ := json.Marshal(map[string]any{"prompt": strings.Repeat("ledger ", n/7)})
	return string(b)
}

// withPayloads gives the bundle's worker a claim-check store on the Env's
// bucket; a call scripted Oversized (bigResult) replies with 20 KB.
func withPayloads(e *testenv.Env, t *testing.T, _ bool) []func(*options) {
	st := e.Payloads(t, 0)
	return []func(*options){
		withSim(simulated.Options{OversizeBytes: 20_000}),
		withHandler(func(h *worker.Handler) { h.Payloads = st }),
	}
}

// createOffloaded records a task whose input was placed in S3 first, as
// the submit handler does.
func (b *bundle) createOffloaded(t *testing.T, key, input string) *ledger.Task {
	t.Helper()
	v, err := b.h.Payloads.PlaceInput(context.Background(), []byte(input))
	if err != nil || v.Ref == nil {
		t.Fatalf("place input: %+v, %v", v, err)
	}
	r := v.Ref
	return b.create(t, key, "", func(n *ledger.NewTask) {
		n.InputRef = &ledger.PayloadRef{Bucket: r.Bucket, Key: r.Key, SHA256: r.SHA256, Size: r.Size}
	})
}

func promptTag(input string) string {
	var in contract.GenerateInput
	_ = json.Unmarshal([]byte(input), &in)
	s := sha256.Sum256([]byte(in.System + "\x00" + in.Prompt))
	return "prompt sha256:" + hex.EncodeToString(s[:4])
}

// TestLargeInputAndResultRoundTrip: an input kept in S3 reaches the
// provider byte for byte (its reply names the prompt's hash); a 20 KB
// result is put at results/<task>/<created_ms>/<version> and the item
// keeps only the reference, whose SHA-256 and size match the stored object
// and the provider's output.
func TestLargeInputAndResultRoundTrip(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		ctx := context.Background()
		input := largeInput(10_000)
		task := b.createOffloaded(t, "large", input)
		b.sim.Script(task.TaskID, simulated.Oversized)
		if task.Input != "" || task.InputRef == nil {
			t.Fatalf("created item keeps input %d bytes, ref %v; want only the reference", len(task.Input), task.InputRef)
		}
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))

		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if got.Result != "" || got.ResultRef == nil {
			t.Fatalf("completed item keeps result %d bytes, ref %v; want only the reference", len(got.Result), got.ResultRef)
		}
		if want := payload.ResultKey(task.TaskID, got.CreatedMs, got.AssignmentVersion); got.ResultRef.Key != want || got.ResultRef.Bucket != e.Names.PayloadBucket {
			t.Fatalf("result ref %+v, want key %s in %s", got.ResultRef, want, e.Names.PayloadBucket)
		}
		body, err := b.h.Payloads.Get(ctx, payload.Ref(*got.ResultRef))
		if err != nil {
			t.Fatalf("read result back: %v", err)
		}
		out := b.sim.Results(task.TaskID)
		if len(out) != 1 || string(out[0].Output) != string(body) || len(body) < 20_000 {
			t.Fatalf("stored result (%d bytes) is not the provider's output", len(body))
		}
		if !strings.Contains(string(body), promptTag(input)) {
			t.Fatalf("the provider did not receive the submitted input (reply lacks %q)", promptTag(input))
		}
	})
}

// TestSmallTaskMakesNoS3Call: with a store configured, a small input and
// a small result stay inline and the worker makes no S3 call at all.
func TestSmallTaskMakesNoS3Call(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, false)...)
		task := b.create(t, "small", prompt)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		e.Counter.Reset()
		wantNoFailures(t, handle(t, b.h, context.Background(), ev))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if got.Result == "" || got.ResultRef != nil {
			t.Fatalf("small result: inline %d bytes, ref %v; want inline", len(got.Result), got.ResultRef)
		}
		for k, n := range e.Counter.Calls() {
			if strings.HasPrefix(k, "S3.") {
				t.Errorf("small task made %d %s call(s)", n, k)
			}
		}
		if e.Counter.Calls()["DynamoDB.UpdateItem"] == 0 {
			t.Fatal("the counter saw no worker call at all")
		}
	})
}

// TestFencedOutWorkersResultIsAnOrphan: worker A's provider ignores
// cancellation and answers after worker B took the task over and
// completed it. A's large result is put under A's own assignment version
// (an orphan, left to the lifecycle rule); the item references B's.
func TestFencedOutWorkersResultIsAnOrphan(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		ctx := context.Background()
		clockA := testenv.NewClock(b.clock.Now())
		gA := newGate(b.sim)
		gA.ignoreCtx = true
		gA.late = &contract.Result{Output: []byte(`{"text":"` + strings.Repeat("stale ", 2000) + `"}`), Provider: "simulated", ProviderRef: "late-ref"}
		hA := b.handler(newLedger(t, e, clockA, ""), gA)
		hA.Payloads = b.h.Payloads

		task := b.create(t, "orphan", largeInput(100))
		b.sim.Script(task.TaskID, simulated.Oversized)
		b.send(t, task.TaskID)
		b.send(t, task.TaskID)
		msgs := b.receive(t, 2, 60)
		doneA := make(chan events.SQSEventResponse, 1)
		go func() { resp, _ := hA.Handle(ctx, b.event(t, loadEvent(t, "sqs-batch.json"), msgs[:1])); doneA <- resp }()
		gA.waitStarted(t)

		b.clock.Advance(31 * time.Second)
		wantNoFailures(t, handle(t, b.h, ctx, b.event(t, loadEvent(t, "sqs-batch.json"), msgs[1:])))
		won := b.get(t, task.TaskID)
		wantState(t, won, ledger.StateCompleted)
		if won.AssignmentVersion != 2 || won.ResultRef == nil || won.ResultRef.Key != payload.ResultKey(task.TaskID, won.CreatedMs, 2) {
			t.Fatalf("winner: version %d, ref %+v; want version 2 referencing %s", won.AssignmentVersion, won.ResultRef, payload.ResultKey(task.TaskID, won.CreatedMs, 2))
		}

		close(gA.release)
		wantNoFailures(t, await(t, doneA))
		final := b.get(t, task.TaskID)
		if *final.ResultRef != *won.ResultRef || final.Result != "" {
			t.Fatalf("the stale worker changed the saved reference: %+v", final.ResultRef)
		}
		// A's object exists under its own version and is referenced by nothing.
		orphan, err := e.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(payload.ResultKey(task.TaskID, won.CreatedMs, 1))})
		if err != nil {
			t.Fatalf("the fenced-out worker's result object is missing: %v", err)
		}
		if aws.ToInt64(orphan.ContentLength) != int64(len(gA.late.Output)) {
			t.Fatalf("orphan holds %d bytes, want the stale %d", aws.ToInt64(orphan.ContentLength), len(gA.late.Output))
		}
		if !strings.Contains(b.logs.String(), `"why":"taken_over"`) {
			t.Errorf("the rejected completion was not explained in the logs")
		}
	})
}

// faultyStore is a store on the Env's bucket whose S3 client injects the
// faults sched picks around the real emulator.
func faultyStore(t *testing.T, e *testenv.Env, sched faultinject.ScheduleFunc) (*payload.Store, *faultinject.Injector) {
	t.Helper()
	inj := faultinject.New(sched)
	o := e.S3.Options()
	o.APIOptions = append(append(o.APIOptions[:0:0], o.APIOptions...), inj.Register)
	st, err := payload.New(s3.New(o), e.Names.PayloadBucket, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st, inj
}

// TestResultPutFaultsAreRetried: the result put first loses its reply (S3
// stored it), then fails with a 5xx, then succeeds; the worker repeats it
// (the put is idempotent) and completes with the reference. Nothing is
// lost, the provider was called once.
func TestResultPutFaultsAreRetried(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		st, inj := faultyStore(t, e, func(c faultinject.Call) faultinject.Kind {
			if c.Key() != "S3.PutObject" {
				return ""
			}
			switch c.N {
			case 1:
				return faultinject.LostReply
			case 2:
				return faultinject.SendFailure
			}
			return ""
		})
		b.h.Payloads = st
		task := b.create(t, "putfault", largeInput(100))
		b.sim.Script(task.TaskID, simulated.Oversized)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, context.Background(), b.deliver(t, 1, 60)))
		if inj.Total(faultinject.LostReply) != 1 || inj.Total(faultinject.SendFailure) != 1 {
			t.Fatalf("faults injected: %v", inj.Injected())
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if got.ResultRef == nil {
			t.Fatal("completed without a result reference")
		}
		body, err := st.Get(context.Background(), payload.Ref(*got.ResultRef))
		if err != nil || string(body) != string(b.sim.Results(task.TaskID)[0].Output) {
			t.Fatalf("stored result differs from the provider's: %v", err)
		}
		if b.sim.TotalSideEffects() != 1 {
			t.Fatalf("provider side effects %d, want 1", b.sim.TotalSideEffects())
		}
	})
}

// TestInputReadFaultReleasesTheTask: S3 refuses the input read; the worker
// gives the claim and its attempt back without calling the provider, and
// the redelivery completes the task.
func TestInputReadFaultReleasesTheTask(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		task := b.createOffloaded(t, "getfault", largeInput(6000))
		down := true
		st, _ := faultyStore(t, e, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "S3.GetObject" && down {
				return faultinject.SendFailure
			}
			return ""
		})
		good := b.h.Payloads
		b.h.Payloads = st
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		wantFailures(t, handle(t, b.h, context.Background(), ev), ev.Records[0].MessageId)
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateQueued)
		if got.Attempts != 0 || b.sim.TotalSideEffects() != 0 {
			t.Fatalf("after the failed read: attempts %d, side effects %d; want 0 and 0", got.Attempts, b.sim.TotalSideEffects())
		}
		b.h.Payloads = good
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, context.Background(), b.deliver(t, 1, 60)))
		wantState(t, b.get(t, task.TaskID), ledger.StateCompleted)
	})
}

// TestInputIntegrityFailureNeverReachesTheProvider: the object behind the
// input reference holds other bytes; the task fails input_unavailable and
// the provider is never called.
func TestInputIntegrityFailureNeverReachesTheProvider(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		ctx := context.Background()
		task := b.createOffloaded(t, "tampered", largeInput(6000))
		other := strings.Replace(largeInput(6000), "ledger", "LEDGER", 1)
		if _, err := e.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.Names.PayloadBucket), Key: aws.String(task.InputRef.Key), Body: strings.NewReader(other)}); err != nil {
			t.Fatal(err)
		}
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, ctx, b.deliver(t, 1, 60)))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateFailed)
		if got.ErrorClass != worker.ErrorClassInputUnavailable || !strings.Contains(got.ErrorMessage, "does not match its reference") {
			t.Fatalf("error %s: %s; want %s naming the mismatch", got.ErrorClass, got.ErrorMessage, worker.ErrorClassInputUnavailable)
		}
		if b.sim.TotalSideEffects() != 0 {
			t.Fatalf("the provider was called %d time(s) with bytes other than the submitted ones", b.sim.TotalSideEffects())
		}
	})
}

// TestResultPutDownFallsBackInline: S3 refuses every put; the worker
// repeats it, then saves the 20 KB result inline (it fits the item) rather
// than lose it: completed, with the provider's result, no reference.
func TestResultPutDownFallsBackInline(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		st, inj := faultyStore(t, e, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "S3.PutObject" {
				return faultinject.SendFailure
			}
			return ""
		})
		b.h.Payloads = st
		task := b.create(t, "putdown", largeInput(100))
		b.sim.Script(task.TaskID, simulated.Oversized)
		b.send(t, task.TaskID)
		wantNoFailures(t, handle(t, b.h, context.Background(), b.deliver(t, 1, 60)))
		if inj.Total(faultinject.SendFailure) < 2 {
			t.Fatalf("the put was not repeated: %v", inj.Injected())
		}
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateCompleted)
		if got.ResultRef != nil || got.Result != string(b.sim.Results(task.TaskID)[0].Output) || len(got.Result) < 20_000 {
			t.Fatalf("result inline %d bytes, ref %+v; want the provider's 20 KB inline", len(got.Result), got.ResultRef)
		}
		if !strings.Contains(b.logs.String(), "saving the result inline") {
			t.Error("the fallback was not logged")
		}
	})
}

// TestResultOverTheObjectLimitIsTooLarge: a result over the payload
// store's 8 MiB object limit fits neither S3 nor the item: parked
// result_too_large, nothing put.
func TestResultOverTheObjectLimitIsTooLarge(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e, t, true)...)
		g := newGate(b.sim)
		close(g.release)
		g.late = &contract.Result{Output: []byte(`{"text":"` + strings.Repeat("w", payload.MaxObjectSize) + `"}`), Provider: "huge", ProviderRef: "huge-1"}
		h := b.handler(b.l, g)
		h.Payloads = b.h.Payloads
		task := b.create(t, "huge", prompt)
		b.send(t, task.TaskID)
		ev := b.deliver(t, 1, 60)
		e.Counter.Reset()
		wantNoFailures(t, handle(t, h, context.Background(), ev))
		got := b.get(t, task.TaskID)
		wantState(t, got, ledger.StateNeedsReview)
		if got.ReviewReason != ledger.ReviewResultTooLarge || got.HasResult() {
			t.Fatalf("parked %s with result %v; want result_too_large, nothing saved", got.ReviewReason, got.HasResult())
		}
		if n := e.Counter.Calls()["S3.PutObject"]; n != 0 {
			t.Fatalf("%d S3 puts of a body over the object limit", n)
		}
	})
}
