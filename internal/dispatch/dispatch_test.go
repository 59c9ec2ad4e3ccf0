package dispatch

import (
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestParse(t *testing.T) {
	t.Parallel()
	id := ledger.TaskID("s", "k")
	good := `{"task_id":"` + id + `"}`
	if m, err := Parse(good); err != nil || m.TaskID != id {
		t.Fatalf("Parse(good) = %+v, %v", m, err)
	}
	for _, bad := range []string{
		"", "null", "[]", "hello", `{"task_id":"x"}`, `{"task_id":"` + id + `","extra":1}`,
		good + good, `{"task_id":` + `1}`, strings.Repeat(" ", MaxBody+1),
	} {
		if _, err := Parse(bad); !errors.Is(err, ErrPoison) {
			t.Errorf("Parse(%q) = %v, want ErrPoison", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"task_id":"` + ledger.TaskID("s", "k") + `"}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := Parse(body)
		if err == nil && !ledger.ValidTaskID(m.TaskID) {
			t.Fatalf("accepted %q", body)
		}
		if err != nil && !errors.Is(err, ErrPoison) {
			t.Fatalf("error not ErrPoison: %v", err)
		}
	})
}
