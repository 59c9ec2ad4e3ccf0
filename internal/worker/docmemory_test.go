package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestDocumentsWaitForTheInstancesDocumentMemory: a worker instance holds
// at most DocumentMemory bytes of documents at once. While one record's
// documents are held (its provider call is running), a record whose
// documents do not fit beside them is given back without a provider call
// and without consuming an attempt, its message delayed by
// DocumentMemoryRetry; once the first call ends, the memory is free and
// the second record runs.
func TestDocumentsWaitForTheInstancesDocumentMemory(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		st := e.Payloads(t, 0)
		b := setup(t, e, withHandler(func(h *worker.Handler) { h.Payloads = st; h.DocumentMemory = 100 }))
		ctx := context.Background()
		g := newGate(b.sim)
		b.h.Provider = g
		withDoc := func(key string, size int) *ledger.Task {
			ref, err := st.PutInput(ctx, []byte(strings.Repeat(key[:1], size)))
			if err != nil {
				t.Fatal(err)
			}
			return b.create(t, key, prompt, func(n *ledger.NewTask) {
				n.Documents = []ledger.DocumentRef{{UploadID: "up-" + key, Format: "txt", ContentType: "text/plain",
					Ref: ledger.PayloadRef{Bucket: ref.Bucket, Key: ref.Key, SHA256: ref.SHA256, Size: ref.Size}}}
			})
		}
		first, second := withDoc("a-doc-task", 80), withDoc("b-doc-task", 80)
		b.send(t, first.TaskID)
		evFirst := b.deliver(t, 1, 60)
		b.send(t, second.TaskID)
		evSecond := b.deliver(t, 1, 60)

		done := make(chan events.SQSEventResponse, 1)
		go func() { done <- handle(t, b.h, ctx, evFirst) }()
		g.waitStarted(t) // the first record holds its 80 bytes

		resp := handle(t, b.h, ctx, evSecond)
		if len(resp.BatchItemFailures) != 1 {
			t.Fatalf("the record whose documents do not fit: %+v, want it back on the queue", resp)
		}
		got := b.get(t, second.TaskID)
		if got.State != ledger.StateQueued || got.Attempts != 0 {
			t.Fatalf("the record whose documents do not fit left its task %s with %d attempts, want queued with 0 (no attempt consumed)", got.State, got.Attempts)
		}
		if n := b.sim.SideEffects(second.TaskID); n != 0 {
			t.Fatalf("the provider was called %d time(s) for the task that did not fit", n)
		}
		delayed := false
		for _, c := range b.sqs.Calls() {
			if c.receipt == evSecond.Records[0].ReceiptHandle && c.secs == int32(worker.DocumentMemoryRetry.Seconds()) {
				delayed = true
			}
		}
		if !delayed {
			t.Errorf("the message was not delayed by DocumentMemoryRetry: %+v", b.sqs.Calls())
		}

		close(g.release)
		wantNoFailures(t, await(t, done))
		wantState(t, b.get(t, first.TaskID), ledger.StateCompleted)

		wantNoFailures(t, handle(t, b.h, ctx, evSecond)) // the memory is free again
		if got := b.get(t, second.TaskID); got.State != ledger.StateCompleted || got.Attempts != 1 {
			t.Fatalf("second task %s after %d attempts, want completed after 1", got.State, got.Attempts)
		}
	})
}
