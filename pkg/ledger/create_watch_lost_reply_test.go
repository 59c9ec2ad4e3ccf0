package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A submit's task put whose reply is lost — inside the SDK's retry loop
// (its repeat fails the condition on the task it put) or past it (the
// caller's own retry is a new Create call, a replay) — whether the first
// put or the replacement of an item past its retention, keeps the watch
// item of the call that put the task: a replay deletes only its own, and
// the reconciler must still find the task whose message may be lost.
func TestCreateKeepsTheWatchItemOfItsOwnTaskPutAfterALostReply(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, replace := range []bool{false, true} {
			for _, mode := range []string{sdkRetry, exhausted} {
				name := mode + map[bool]string{false: "-first-put", true: "-replacement"}[replace]
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					b := setup(t, e, func(c *ledger.Config) { c.WatchTable = e.Names.WatchTable })
					key := "watch-lost-" + name
					nth := int32(2) // the watch item's put, then the task's
					if replace {
						old := mustCreate(t, b, key)
						c, err := b.l.Claim(ctx, old.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
						if err != nil {
							t.Fatal(err)
						}
						done, err := b.l.Complete(ctx, old.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"old":true}`})
						if err != nil {
							t.Fatal(err)
						}
						b.clock.Set(time.Unix(done.ExpiresAt+1, 0))
						if mode == exhausted {
							nth = 3 // the refused first put is a call too
						}
					}
					l, lost := loseNth(t, b, mode, "PutItem", nth)
					got, err := l.Create(ctx, newTask(key, "p"))
					if !lost() {
						t.Fatal("the fault was not injected")
					}
					if mode == sdkRetry && err != nil {
						t.Fatalf("Create after a lost reply inside the SDK's retries = %v; want its own task", err)
					}
					if mode == exhausted {
						if err == nil {
							t.Fatalf("Create after a lost reply = %+v; want an error", got)
						}
						// The caller retries: a replay of the task put.
						if _, err := b.l.Create(ctx, newTask(key, "p")); !errors.As(err, new(*ledger.DuplicateError)) {
							t.Fatalf("the caller's retry = %v; want a replay", err)
						}
					}
					stored, err := b.l.Get(ctx, b.l.TaskID("alice", key))
					if err != nil {
						t.Fatal(err)
					}
					if stored.State != ledger.StateQueued || stored.StateShard != "" {
						t.Fatalf("stored task %s (state_shard %q); want the new queued, unindexed task", stored.State, stored.StateShard)
					}
					sks := b.env.WatchSKs(t, stored.TaskID)
					found := false
					for _, sk := range sks {
						found = found || strings.HasSuffix(sk, "#"+stored.CreateNonce)
					}
					if !found {
						t.Fatalf("watch items naming %s: %q; none of the call that put it (nonce %s): the reconciler would never find it",
							stored.TaskID, sks, stored.CreateNonce)
					}
				})
			}
		}
	})
}
