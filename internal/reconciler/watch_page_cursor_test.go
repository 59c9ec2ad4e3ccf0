package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A shard's query starts at its cursor's own item (BETWEEN is inclusive)
// and a one-item page can hold only that item: the run must page on
// past it, reading each later item exactly once, and never the cursor's
// again.
func TestWatchPagesPastItsCursorItemOneItemAPage(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setupShards(t, e, 1)
		create(t, b, "page-first")
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		h := b.handler()
		h.PageLimit = 1
		if s := handle(t, h); s.Watched != 1 || s.Adopted != 1 {
			t.Fatalf("first run: %+v", s)
		}
		for _, k := range []string{"page-a", "page-b", "page-c"} {
			create(t, b, k)
			b.clock.Advance(time.Millisecond)
		}
		b.clock.Advance(ledger.DefaultDispatchTimeout + time.Second)
		h = b.handler()
		h.PageLimit = 1
		if s := handle(t, h); s.Watched != 3 || s.Adopted != 3 {
			t.Fatalf("second run, one item a page: %+v; want the 3 new items read and adopted, the cursor's not again", s)
		}
		if s := handle(t, h); s.Watched != 0 {
			t.Fatalf("third run read %d watch items again", s.Watched)
		}
	})
}
