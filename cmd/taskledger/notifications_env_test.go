package main

import (
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestInvalidNotificationsDoNotBlockCommandsThatNeverNotify: the CLI reads
// TASKLEDGER_NOTIFICATIONS only for approve and withdraw, which notify. An
// operator whose environment carries a value the CLI cannot parse (a stale
// export, a different stack's) must still be able to see what is parked and
// decide the tasks that notify nobody (DESIGN §1.6: every decision is
// inspectable): review list, task get and reject do not depend on it.
func TestInvalidNotificationsDoNotBlockCommandsThatNeverNotify(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		p := parked(t, b, "bad-notify-env")
		gated := awaitingApproval(t, b, "bad-notify-env-gated")
		env := map[string]string{"USER": "alice-ops", followup.EnvVar: `{"page_origin":"not an origin"}`}
		for _, args := range [][]string{
			{"review", "list"},
			{"task", "get", p.TaskID},
			{"reject", gated.TaskID, "--note", "no"},
		} {
			r := b.cli(env, append(args, b.flags()...)...)
			if r.code != 0 {
				t.Errorf("taskledger %s with an invalid %s: exit %d, stderr %q; want it to run (it notifies nobody)",
					strings.Join(args, " "), followup.EnvVar, r.code, strings.TrimSpace(r.stderr))
			}
		}
	})
}
