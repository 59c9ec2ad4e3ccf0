package templatetest

import (
	"strconv"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
)

// TestAttack13WorkerMemoryHoldsADocumentBatch (adversarial review of issue
// 13): the worker reads every document of a task into memory (payload
// Store.Get, up to payload.MaxDocumentSize each, api.MaxDocuments per
// task) and processes a whole SQS batch at once (WORKER_CONCURRENCY >=
// BatchSize, by the timing arithmetic). So one batch may hold BatchSize x
// MaxDocuments x MaxDocumentSize bytes of documents live at the same time —
// before the Go heap's GC headroom (GOGC=100 lets the heap reach twice the
// live bytes) and before Bedrock's request, which carries every document
// again base64-encoded (4/3 the size). A 256 MB worker dies of OOM on a
// batch of document tasks; Lambda then retries the whole batch, whose
// records are redelivered together, calls that were in flight become
// unknown, and the same batch can kill the next instance.
//
// This asserts only the raw documents plus 64 MB for the runtime — the
// lowest bound, ignoring GC headroom and the base64 copy.
//
// Smallest fix: bound the document bytes a worker instance holds (a
// semaphore on document bytes across the batch, admitting a record's
// documents only when they fit; or stream documents instead of reading
// them whole), or raise MemorySize to what the arithmetic needs, and put
// the rule in TestWorkerTimingArithmetic's company.
func TestAttack13WorkerMemoryHoldsADocumentBatch(t *testing.T) {
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
		need := int64(conc)*api.MaxDocuments*payload.MaxDocumentSize/mib + 64
		if int64(fn.MemorySize) < need {
			t.Errorf("WorkerFunction MemorySize %d MB < %d records at once x %d documents x %d bytes + 64 MB runtime = %d MB: a batch of document tasks can exceed the worker's memory",
				fn.MemorySize, conc, api.MaxDocuments, payload.MaxDocumentSize, need)
		}
	}
	if checked != 1 {
		t.Fatalf("found %d SQS event sources of WorkerFunction, want 1", checked)
	}
}
