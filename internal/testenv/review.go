package testenv

import (
	"strconv"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// ReviewCommands returns the operator commands of cmd/taskledger that
// safe actions suggest, each quoted `taskledger review …`, in order.
func ReviewCommands(actions []string) []string {
	var out []string
	for _, a := range actions {
		parts := strings.Split(a, "`")
		for i := 1; i < len(parts); i += 2 {
			if strings.HasPrefix(parts[i], "taskledger review ") {
				out = append(out, parts[i])
			}
		}
	}
	return out
}

// WantReviewCommandsAt fails t unless r suggests at least one operator
// command and each decides park n alone (one "--park n", at its end): a
// command copied from the review must decide the park it was read on.
func WantReviewCommandsAt(t testing.TB, r *ledger.Review, n int) {
	t.Helper()
	cmds := ReviewCommands(r.SafeActions)
	if len(cmds) == 0 {
		t.Fatalf("review of %s (%s, park %d) suggests no operator command: %q", r.TaskID, r.Reason, r.ParkCount, r.SafeActions)
	}
	for _, c := range cmds {
		if strings.Count(c, "--park") != 1 || !strings.HasSuffix(c, " --park "+strconv.Itoa(n)) {
			t.Errorf("review of %s (%s, park %d) suggests %q; want it to decide park %d (--park %d)", r.TaskID, r.Reason, r.ParkCount, c, n, n)
		}
	}
	if r.ParkCount != n {
		t.Errorf("review of %s is at park %d, want %d", r.TaskID, r.ParkCount, n)
	}
}
