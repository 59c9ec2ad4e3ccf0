package ledger

import "testing"

func TestTaskIDStableAndScoped(t *testing.T) {
	t.Parallel()
	a := TaskID("alice", "k")
	if a != TaskID("alice", "k") {
		t.Fatal("TaskID not deterministic")
	}
	if a == TaskID("bob", "k") || a == TaskID("alice", "k2") {
		t.Fatal("TaskID collides across scope or key")
	}
	if !ValidTaskID(a) || ValidTaskID("t_ABC") || ValidTaskID(a+"x") {
		t.Fatalf("ValidTaskID wrong for %q", a)
	}
	// scope/key boundary cannot be shifted
	if TaskID("ab", "c") == TaskID("a", "bc") {
		t.Fatal("boundary ambiguity")
	}
}

func TestTruncateRuneBoundary(t *testing.T) {
	t.Parallel()
	s := "héllo"
	got := truncate(s, 2)
	if got != "h…" {
		t.Fatalf("truncate = %q", got)
	}
}
