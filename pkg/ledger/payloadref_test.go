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

// TestPayloadRefs: an input reference is stored instead of the input; a
// completion with a result reference saves only the reference, counts as
// a saved result (a second completion is fenced already_completed), and
// the completed item stays small whatever the result's size.
func TestPayloadRefs(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		in := &ledger.PayloadRef{Bucket: "payloads", Key: "inputs/" + strings.Repeat("a", 64), SHA256: strings.Repeat("a", 64), Size: 12_000}
		n := newTask("refs", "x")
		n.Input, n.InputRef = "", in
		if _, err := b.l.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		c, err := b.l.Claim(ctx, ledger.TaskID("alice", "refs"), ledger.ClaimOptions{Owner: "w", Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c.Input != "" || c.InputRef == nil || *c.InputRef != *in {
			t.Fatalf("claimed input %q ref %+v, want only %+v", c.Input, c.InputRef, in)
		}
		out := &ledger.PayloadRef{Bucket: "payloads", Key: "results/" + c.TaskID + "/1", SHA256: strings.Repeat("b", 64), Size: 300_000}
		inline, _ := ledger.CompletedItemSize(c, ledger.Completion{Result: `"` + strings.Repeat("w", 300_000) + `"`})
		byRef, _ := ledger.CompletedItemSize(c, ledger.Completion{ResultRef: out})
		if byRef > 2048 || inline < 300_000 {
			t.Fatalf("completed item: %d bytes by reference, %d inline", byRef, inline)
		}
		done, err := b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{ResultRef: out, Provider: "sim"})
		if err != nil {
			t.Fatal(err)
		}
		if done.State != ledger.StateCompleted || done.Result != "" || done.ResultRef == nil || *done.ResultRef != *out || !done.HasResult() {
			t.Fatalf("completed %s result %q ref %+v", done.State, done.Result, done.ResultRef)
		}
		_, err = b.l.Complete(ctx, c.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"again"}`})
		var fe *ledger.FencedError
		if !errors.As(err, &fe) || fe.Why != "already_completed" {
			t.Fatalf("second completion: %v, want fenced already_completed", err)
		}
		got, _ := b.l.Get(ctx, c.TaskID)
		if got.Result != "" || *got.ResultRef != *out {
			t.Fatalf("second completion changed the item: result %q ref %+v", got.Result, got.ResultRef)
		}
	})
}
