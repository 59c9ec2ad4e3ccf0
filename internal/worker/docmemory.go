package worker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// DefaultDocumentMemory bounds the document bytes one worker instance holds
// at once: one task's largest set (5 x payload.MaxDocumentSize = 22.5 MB);
// all else in flight is small. For the 256 MB WorkerFunction
// (internal/templatetest): the raw bytes, a base64 copy in the Bedrock
// request (4/3), doubled for GC headroom, plus 64 MB of runtime: 22.5 x 7/3
// x 2 + 64 ≈ 169 MB.
const DefaultDocumentMemory = 5 * payload.MaxDocumentSize

// DocumentMemoryRetry is how long a record whose documents do not fit
// waits on the queue before it is tried again (its attempt given back).
const DocumentMemoryRetry = 10 * time.Second

func (h *Handler) documentMemory() int64 { return orDefault(h.DocumentMemory, DefaultDocumentMemory) }

// holdDocuments reserves the bytes of t's documents; ok=false when they do
// not fit beside those other records hold. Capped at the bound, they fit an
// empty instance: a record never waits for itself. release returns the
// bytes once the documents are no longer referenced.
func (h *Handler) holdDocuments(t *ledger.Task) (release func(), ok bool) {
	var n int64
	for _, d := range t.Documents {
		n += d.Ref.Size
	}
	if n == 0 {
		return func() {}, true
	}
	n = min(n, h.documentMemory())
	for {
		used := atomic.LoadInt64(&h.docUsed)
		if used+n > h.documentMemory() {
			return nil, false
		}
		if atomic.CompareAndSwapInt64(&h.docUsed, used, used+n) {
			break
		}
	}
	var once sync.Once
	return func() { once.Do(func() { atomic.AddInt64(&h.docUsed, -n) }) }, true
}
