package templatetest

import (
	"strconv"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/worker"
)

// TestWorkerMemoryHoldsADocumentBatch: the worker reads every document of
// a task into memory (payload Store.Get, up to payload.MaxDocumentSize
// each, api.MaxDocuments per task) and processes a whole SQS batch at once
// (WORKER_CONCURRENCY >= BatchSize, by the timing arithmetic). One batch
// could hold BatchSize x MaxDocuments x MaxDocumentSize bytes of documents
// live at the same time — before the Go heap's GC headroom (GOGC=100 lets
// the heap reach twice the live bytes) and before Bedrock's request, which
// carries every document again base64-encoded (4/3 the size). A worker that
// runs out of memory on a batch of document tasks has Lambda retry the
// whole batch, whose records are redelivered together; calls that were in
// flight become unknown, and the same batch can kill the next instance.
//
// The worker bounds it: an instance holds at most
// worker.DefaultDocumentMemory bytes of documents at once (one task's
// largest set); a record whose documents do not fit is given back without
// consuming an attempt (internal/worker/docmemory.go,
// TestDocumentsWaitForTheInstancesDocumentMemory). The arithmetic below
// uses that bound — the smaller of it and what a batch could hold — and
// counts the base64 copy in Bedrock's request (4/3) and the Go heap's GC
// headroom (x2), plus 64 MB for the runtime.
func TestWorkerMemoryHoldsADocumentBatch(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	fn := tpl.Functions()["WorkerFunction"]
	checked := 0
	for _, e := range tpl.SQSEvents() {
		if e.Function != "WorkerFunction" {
			continue
		}
		checked++
		conc := e.BatchSize
		if s, ok := fn.Env["WORKER_CONCURRENCY"].(string); ok {
			if n, err := strconv.Atoi(s); err == nil && n < conc {
				conc = n
			}
		}
		const mib = 1 << 20
		held := min(int64(conc)*api.MaxDocuments*payload.MaxDocumentSize, int64(worker.DefaultDocumentMemory))
		if one := int64(api.MaxDocuments * payload.MaxDocumentSize); held < one {
			t.Errorf("worker.DefaultDocumentMemory %d < one task's documents (%d x %d): such a task would never fit", worker.DefaultDocumentMemory, api.MaxDocuments, payload.MaxDocumentSize)
		}
		need := held*7/3*2/mib + 64
		if int64(fn.MemorySize) < need {
			t.Errorf("WorkerFunction MemorySize %d MB < %d document bytes held at once x 7/3 (base64 copy) x 2 (GC) + 64 MB runtime = %d MB: document tasks can exceed the worker's memory",
				fn.MemorySize, held, need)
		}
		t.Logf("documents held at once %d bytes; need %d MB of %d MB", held, need, fn.MemorySize)
	}
	if checked != 1 {
		t.Fatalf("found %d SQS event sources of WorkerFunction, want 1", checked)
	}
}
