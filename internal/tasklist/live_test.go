package tasklist_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestQueryLivePagesAndSkipsTerminal(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, func(c *ledger.Config) { c.Shards = 2 })
		ctx := context.Background()
		live := map[string]bool{}
		for i := range 14 {
			// kumo orders equal sort keys unstably between pages (real
			// DynamoDB and moto do not), so give every task its own due_at.
			b.clock.Advance(time.Millisecond)
			task := mustCreate(t, b, fmt.Sprintf("q%d", i))
			if i%4 == 0 {
				c, _ := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w"})
				if _, err := b.l.Complete(ctx, task.TaskID, c.AssignmentVersion, ledger.Completion{Result: "{}"}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			live[task.TaskID] = true
		}
		seen := map[string]bool{}
		pages := 0
		for shard := range 2 {
			cursor := ""
			for {
				refs, next, err := tasklist.QueryLive(ctx, b.l, tasklist.LiveQuery{State: ledger.StateQueued, Shard: shard, Limit: 3, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, r := range refs {
					if !live[r.TaskID] || seen[r.TaskID] || r.Partition() != ledger.StateActive {
						t.Fatalf("unexpected ref %+v", r)
					}
					seen[r.TaskID] = true
				}
				if next == "" {
					break
				}
				cursor = next
			}
		}
		if len(seen) != len(live) || pages < 4 {
			t.Fatalf("saw %d of %d live tasks in %d pages", len(seen), len(live), pages)
		}
		n := 0
		for shard := range 2 {
			c, err := tasklist.CountLive(ctx, b.l, ledger.StateQueued, shard)
			if err != nil {
				t.Fatal(err)
			}
			n += c
		}
		if n != len(live) {
			t.Fatalf("CountLive = %d, want %d", n, len(live))
		}
		if _, _, err := tasklist.QueryLive(ctx, b.l, tasklist.LiveQuery{State: ledger.StateQueued, Cursor: "!!"}); !errors.Is(err, tasklist.ErrBadCursor) {
			t.Fatalf("bad cursor: %v", err)
		}
	})
}

// An index entry becomes the partial task the relay dispatches only for a
// partition the dispatch transition moves from, and only with an age
// deadline to check; any other entry is read first.
func TestRelayTaskOnlyForDispatchableEntriesWithADeadline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		shard    string
		deadline int64
		want     ledger.State // "": no relay task
	}{
		{"active#00", 5, ledger.StateQueued},
		{"retry_wait#01", 5, ledger.StateRetryWait},
		{"unknown#00", 5, ""},
		{"awaiting_approval#00", 5, ""},
		{"active#00", 0, ""},
	} {
		ref := tasklist.LiveRef{TaskID: "t", StateShard: c.shard, DueAt: 3, DeadlineMs: c.deadline, Dispatches: 2, MaxAttempts: 4}
		got, ok := ref.RelayTask()
		if c.want == "" {
			if ok {
				t.Errorf("%s (deadline %d): relay task %+v, want none", c.shard, c.deadline, got)
			}
			continue
		}
		if !ok || got.State != c.want || got.TaskID != "t" || got.DueAt != 3 || got.DeadlineMs != c.deadline || got.Dispatches != 2 || got.MaxAttempts != 4 {
			t.Errorf("%s: relay task %+v %v, want one in state %s carrying the entry", c.shard, got, ok, c.want)
		}
	}
}

// ListOpenReviews pages through the open review items oldest first, each
// once, leaves out a resolved one, and refuses a cursor it did not give.
func TestListOpenReviewsPagesOldestFirstWithoutResolved(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		var want []string
		for i := range 5 {
			b.clock.Advance(time.Second)
			r, err := b.l.PutPoison(ctx, ledger.Review{MessageID: fmt.Sprintf("m%d", i), Summary: "not a task reference", BodySHA256: "abc", BodyBytes: 3})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, r.TaskID)
		}
		if _, _, _, err := b.l.Act(ctx, want[2], ledger.OperatorAction{Resolution: ledger.ResolutionFailed, By: "ops", Note: "garbage"}); err != nil {
			t.Fatal(err)
		}
		want = append(want[:2], want[3:]...)
		var got []string
		cursor := ""
		for pages := 1; ; pages++ {
			items, next, err := tasklist.ListOpenReviews(ctx, b.l, 2, cursor)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				got = append(got, it.TaskID)
			}
			if next == "" {
				break
			}
			if pages > 10 {
				t.Fatal("more than 10 pages")
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("open reviews %v, want %v", got, want)
		}
		if _, _, err := tasklist.ListOpenReviews(ctx, b.l, 2, "!!"); !errors.Is(err, tasklist.ErrBadCursor) {
			t.Fatalf("bad cursor: %v", err)
		}
	})
}
