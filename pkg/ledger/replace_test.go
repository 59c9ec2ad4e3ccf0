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

// TestNewRejectsShortRetention: a retention shorter than MinRetention
// would let TTL delete a task (and its fencing token) while a worker of it
// may still run; New refuses it with an error naming the minimum.
func TestNewRejectsShortRetention(t *testing.T) {
	t.Parallel()
	for _, r := range []time.Duration{time.Minute, ledger.MinRetention - time.Second} {
		_, err := ledger.New(nil, ledger.Config{TasksTable: "t", ReviewTable: "r", Retention: r})
		if err == nil || !strings.Contains(err.Error(), "MinRetention") {
			t.Errorf("Retention=%s: err %v, want a MinRetention error", r, err)
		}
	}
	l, err := ledger.New(nil, ledger.Config{TasksTable: "t", ReviewTable: "r", Retention: ledger.MinRetention})
	if err != nil || l.Config().Retention != ledger.MinRetention {
		t.Fatalf("Retention=MinRetention: %v", err)
	}
}

// TestReplacementIsCreatedOnce: two submissions with the same key but
// different payloads after the old task expired: the first replaces the
// expired item (keeping its version), the second meets the replacement and
// is rejected as a payload mismatch rather than replacing it again.
func TestReplacementIsCreatedOnce(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, func(c *ledger.Config) { c.Retention = ledger.MinRetention })
		ctx := context.Background()
		old, err := b.l.Create(ctx, newTask("replace-once", "old"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.l.Claim(ctx, old.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Fail(ctx, old.TaskID, c.AssignmentVersion, "permanent_input", "bad"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(ledger.MinRetention + time.Second)
		first, err := b.l.Create(ctx, newTask("replace-once", "first"))
		if err != nil {
			t.Fatalf("re-create past retention: %v", err)
		}
		if first.AssignmentVersion != c.AssignmentVersion {
			t.Errorf("replacement version %d, want the expired item's %d", first.AssignmentVersion, c.AssignmentVersion)
		}
		_, err = b.l.Create(ctx, newTask("replace-once", "second"))
		if !errors.As(err, new(*ledger.PayloadMismatchError)) {
			t.Fatalf("second re-create: err %v, want *PayloadMismatchError", err)
		}
		got, err := b.l.Get(ctx, old.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.StateQueued || got.PayloadSHA256 != "sha-first" || got.AssignmentVersion != c.AssignmentVersion {
			t.Fatalf("task after two re-creates: state %s payload %s version %d", got.State, got.PayloadSHA256, got.AssignmentVersion)
		}
	})
}
