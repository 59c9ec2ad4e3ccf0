package ledger

import (
	"fmt"
	"strings"
	"testing"
)

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

func TestKeyedTaskIDCannotBeComputedFromKey(t *testing.T) {
	t.Parallel()
	key := SecretKey("0123456789abcdef0123456789abcdef")
	l, err := New(nil, Config{TasksTable: "t", ReviewTable: "r", IDKey: key})
	if err != nil {
		t.Fatal(err)
	}
	id := l.TaskID("anonymous", "k")
	if !ValidTaskID(id) || id != l.TaskID("anonymous", "k") {
		t.Fatalf("keyed id %q not valid or not stable", id)
	}
	if id == TaskID("anonymous", "k") {
		t.Fatal("keyed id equals the unkeyed one: computable from the key")
	}
	other, _ := New(nil, Config{TasksTable: "t", ReviewTable: "r", IDKey: SecretKey("fedcba9876543210fedcba9876543210")})
	if other.TaskID("anonymous", "k") == id {
		t.Fatal("two secrets derive the same id")
	}
	if id == l.TaskID("jwt:bob", "k") || id == l.TaskID("anonymous", "k2") {
		t.Fatal("keyed id collides across scope or key")
	}
	unkeyed, _ := New(nil, Config{TasksTable: "t", ReviewTable: "r"})
	if unkeyed.TaskID("a", "k") != TaskID("a", "k") {
		t.Fatal("a ledger without IDKey does not use the unkeyed derivation")
	}
	if _, err := New(nil, Config{TasksTable: "t", ReviewTable: "r", IDKey: SecretKey("short")}); err == nil {
		t.Fatal("a 5-byte IDKey was accepted")
	}
	for _, s := range []string{fmt.Sprint(l.Config()), fmt.Sprintf("%+v", l.Config()), fmt.Sprintf("%#v", l.Config()), fmt.Sprintf("%s", key)} {
		if strings.Contains(s, "0123456789abcdef") {
			t.Fatalf("the key is printed: %s", s)
		}
	}
}
