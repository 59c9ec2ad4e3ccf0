package demo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/demo"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startStack runs the local stack (make run's, with the scenarios'
// destinations) on the leg's endpoint and returns a Target on it.
func startStack(t *testing.T, e *testenv.Env, progress *testenv.Buffer) *demo.Target {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := local.Start(ctx, local.Options{
		Addr: "127.0.0.1:0", Endpoint: e.Endpoint, Prefix: testenv.UniquePrefix(),
		Destinations: demo.Config(), ReconcileEvery: 500 * time.Millisecond, PollWait: time.Second,
		StatusEvery: -1, Progress: progress,
	})
	if err != nil {
		t.Fatalf("local.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &demo.Target{
		URL: st.URL, Sims: st.Destinations.Sims,
		Hold: st.PausePoller, Release: st.ResumePoller,
		Idle:     demo.QueueIdle(st.SQS, st.Names.TaskQueueURL, 100*time.Millisecond),
		Progress: progress,
	}
}

// The three seed scenarios through the HTTP API of the local stack, on
// kumo and moto: every check a scenario makes (states, the approval, every
// receipt field, the destination's own side-effect counts) must hold, and
// the printed receipts show what was checked.
func TestSeedScenarios(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		progress := &testenv.Buffer{}
		tg := startStack(t, e, progress)
		for _, sc := range demo.Scenarios() {
			ok := t.Run(sc.ID, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				res, err := sc.Run(ctx, tg)
				var out strings.Builder
				demo.Print(&out, res, err)
				if err != nil {
					t.Fatalf("scenario %s failed: %v\n%s\nprogress:\n%s", sc.ID, err, out.String(), progress.String())
				}
				if len(res.Cases) == 0 {
					t.Fatal("no case ran")
				}
				printed := out.String()
				for _, want := range []string{": PASS", "operation_id", "approved_by", "readback_result"} {
					if !strings.Contains(printed, want) {
						t.Errorf("printed block lacks %q:\n%s", want, printed)
					}
				}
				t.Logf("%s", printed)
			})
			if !ok {
				return
			}
		}
	})
}
