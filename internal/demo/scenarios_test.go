package demo_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/demo"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// reconcileEvery is the stack's reconciler period. The scenarios need the
// reconciler only for their readbacks, due reconciler.DefaultSettle (30 s)
// after a delivery's reply was lost, so a readback comes at most one period
// later. Every run walks and counts every by_state stream (161 queries even
// on an empty table at the deployed 16 shards, 21 at the stack's 2 here):
// at a sub-second period moto does nothing else for the whole wait.
const reconcileEvery = 5 * time.Second

// startStack runs the local stack (make run's, with the scenarios'
// destinations) on the leg's endpoint and returns a Target on it.
func startStack(t *testing.T, e *testenv.Env, progress *testenv.Buffer) *demo.Target {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The example receiving function's handler in process behind the
	// Invoke API (make demo runs the built function under aws-lambda-rie).
	fn := demo.ServeExampleFunction()
	t.Cleanup(fn.Close)
	const arn = "arn:aws:lambda:us-east-1:123456789012:function:example"
	dests := demo.Config()
	demo.WithPeople(&dests, arn)
	st, err := local.Start(ctx, local.Options{
		Addr: "127.0.0.1:0", Endpoint: e.Endpoint, Prefix: testenv.UniquePrefix(),
		Destinations: dests, Notify: demo.Notify, LambdaEndpoint: fn.URL, ReconcileEvery: reconcileEvery, PollWait: time.Second,
		Shards: 2, StatusEvery: -1, Progress: progress,
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
		Mail:     demo.SentMail(e.Endpoint, e.Backend),
		Lookup:   demo.LambdaLookup(fn.URL, arn),
		// Set before the scenarios run at once (Target.run sets it lazily).
		Run: strconv.FormatInt(time.Now().UnixMilli(), 36),
		// A task's state is polled for up to half a minute: four times a
		// second is prompt enough and spares the emulator.
		Poll: 250 * time.Millisecond,
	}
}

// The seed scenarios (and 015, the people around the work) through the HTTP API of the local stack, on
// kumo and moto: every check a scenario makes (states, the approval, every
// receipt field, the destination's own side-effect counts) must hold, and
// the printed receipts show what was checked.
//
// The scenarios run at once on one stack per leg: each spends most of its
// time waiting for the reconciler's readback, 30 s after its lost reply.
// They stay independent there: each has its own idempotency keys and its
// own destination (notify, publish, crm), whose counts it checks; the
// withdraw case's hold of the poller only delays the others' messages, and
// its wait for an idle queue only waits for theirs too.
func TestSeedScenarios(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		progress := &testenv.Buffer{}
		tg := startStack(t, e, progress)
		// From goroutines rather than as parallel subtests, which would
		// queue for the -parallel slots (GOMAXPROCS: 2 on a 2-core
		// machine) behind the other leg's scenarios, all of them waiting.
		var wg sync.WaitGroup
		for _, sc := range demo.Scenarios() {
			wg.Go(func() {
				t.Run(sc.ID, func(t *testing.T) {
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
			})
		}
		wg.Wait()
	})
}
