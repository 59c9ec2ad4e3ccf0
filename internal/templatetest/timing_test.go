package templatetest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/worker"
)

// maxLambdaTimeout is the largest function timeout Lambda allows.
const maxLambdaTimeout = 15 * time.Minute

// timingVars are the worker's variables the timing arithmetic reads.
var timingVars = map[string]bool{"WORKER_CONCURRENCY": true, "PROVIDER_TIMEOUT": true, "LEASE_SECONDS": true}

// (vii) The worker's timing is one arithmetic (docs/timing.md), checked
// against the parsed template and the worker's and providers' defaults.
func TestWorkerTimingArithmetic(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	fns := tpl.Functions()
	var checked int
	for _, e := range tpl.SQSEvents() {
		if e.Function != "WorkerFunction" {
			continue
		}
		checked++
		fn := fns[e.Function]
		vt := tpl.QueueVisibilityTimeout(e.Queue)
		for _, p := range timingProblems(fn, e, vt) {
			t.Errorf("%s / %s: %s", e.Function, e.Queue, p)
		}
		t.Logf("%s: BatchSize %d, window %v, env %v, Timeout %v; %s VisibilityTimeout %v",
			e.Function, e.BatchSize, e.MaxBatchingWindow, fn.Env, fn.Timeout, e.Queue, vt)
	}
	if checked != 1 {
		t.Fatalf("found %d SQS event sources of WorkerFunction, want 1", checked)
	}
}

// TestTimingArithmeticCatchesInconsistency: the rules reject the numbers
// of the earlier template (a 60 s worker, 2-minute provider calls, a batch of 10
// processed 4 at a time, a 360 s queue) and the other ways to break them.
func TestTimingArithmeticCatchesInconsistency(t *testing.T) {
	t.Parallel()
	good := func() (stack.Function, stack.EventSourceMapping, time.Duration) {
		return stack.Function{Timeout: 140 * time.Second, Env: map[string]any{
				"WORKER_CONCURRENCY": "10", "PROVIDER_TIMEOUT": "120", "LEASE_SECONDS": "30"}},
			stack.EventSourceMapping{BatchSize: 10, MaxBatchingWindow: time.Second}, 900 * time.Second
	}
	fn, e, vt := good()
	if p := timingProblems(fn, e, vt); len(p) != 0 {
		t.Fatalf("consistent numbers rejected: %v", p)
	}
	cases := map[string]struct {
		mod  func(*stack.Function, *stack.EventSourceMapping, *time.Duration)
		want []string
	}{
		"earlier template": {func(f *stack.Function, _ *stack.EventSourceMapping, vt *time.Duration) {
			f.Timeout, f.Env["WORKER_CONCURRENCY"], *vt = 60*time.Second, "4", 360*time.Second
		}, []string{"WORKER_CONCURRENCY 4 < BatchSize 10", "Timeout 1m0s < PROVIDER_TIMEOUT", "VisibilityTimeout 6m0s < 6 × Timeout"}},
		"call timeout raised alone": {func(f *stack.Function, _ *stack.EventSourceMapping, _ *time.Duration) {
			f.Env["PROVIDER_TIMEOUT"] = "3m"
		}, []string{"Timeout 2m20s < PROVIDER_TIMEOUT 3m0s"}},
		"call timeout unset": {func(f *stack.Function, _ *stack.EventSourceMapping, _ *time.Duration) {
			delete(f.Env, "PROVIDER_TIMEOUT")
		}, []string{"PROVIDER_TIMEOUT is not set"}},
		"batch grown alone": {func(_ *stack.Function, e *stack.EventSourceMapping, _ *time.Duration) {
			e.BatchSize = 20
		}, []string{"WORKER_CONCURRENCY 10 < BatchSize 20", "worker.DefaultConcurrency 10 < BatchSize 20"}},
		"batching window ignored": {func(_ *stack.Function, e *stack.EventSourceMapping, vt *time.Duration) {
			e.MaxBatchingWindow, *vt = 10*time.Second, 840*time.Second
		}, []string{"+ batching window 10s"}},
		"short lease": {func(f *stack.Function, _ *stack.EventSourceMapping, _ *time.Duration) {
			f.Env["LEASE_SECONDS"] = "6"
		}, []string{"outlives its last heartbeat by 4s"}},
		"past Lambda's maximum": {func(f *stack.Function, _ *stack.EventSourceMapping, vt *time.Duration) {
			f.Timeout, *vt = 20*time.Minute, 12*time.Hour
		}, []string{"Lambda's maximum"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fn, e, vt := good()
			c.mod(&fn, &e, &vt)
			got := strings.Join(timingProblems(fn, e, vt), "\n")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems lack %q:\n%s", w, got)
				}
			}
		})
	}
}

// timingProblems checks one worker function and its SQS event source
// mapping (vt is the queue's VisibilityTimeout):
//
//   - in-batch concurrency (WORKER_CONCURRENCY, and worker.DefaultConcurrency
//     for local runs) ≥ BatchSize: every record starts in the first wave;
//   - Timeout ≥ call timeout + DeadlineMargin + AdmissionSlack, for the
//     template's PROVIDER_TIMEOUT (which must be set) and for every default
//     call timeout (a local run, or a provider that declares none): a full
//     first wave is admitted, and an admitted call finishes before the
//     deadline margin;
//   - Timeout ≤ 15 minutes (Lambda's maximum);
//   - VisibilityTimeout ≥ 6 × Timeout + MaximumBatchingWindowInSeconds;
//   - the lease: after its last heartbeat (every Lease/3) a lease still runs
//     at least DeadlineMargin (the attempt is saved within the margin), and
//     the heartbeat's visibility extension (2 × Lease) stays within the
//     queue's VisibilityTimeout.
func timingProblems(fn stack.Function, e stack.EventSourceMapping, vt time.Duration) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	env := func(name string) string {
		switch v := fn.Env[name].(type) {
		case nil:
			return ""
		case string:
			return v
		case int:
			return strconv.Itoa(v)
		default: // a Ref: fine for the provider's other settings, not for a number here
			if timingVars[name] {
				bad("%s = %v: want a literal, the timing arithmetic needs its value", name, v)
			}
			return ""
		}
	}
	margin, slack := worker.DefaultDeadlineMargin, worker.AdmissionSlack

	conc, err := strconv.Atoi(env("WORKER_CONCURRENCY"))
	if err != nil {
		bad("WORKER_CONCURRENCY = %q: want an integer", env("WORKER_CONCURRENCY"))
	}
	if conc < e.BatchSize {
		bad("WORKER_CONCURRENCY %d < BatchSize %d: later waves start with less time left and are turned away", conc, e.BatchSize)
	}
	if worker.DefaultConcurrency < e.BatchSize {
		bad("worker.DefaultConcurrency %d < BatchSize %d (local runs use the default)", worker.DefaultConcurrency, e.BatchSize)
	}

	pc := provider.ConfigFromEnv(env) // parsed exactly as the worker parses it
	if err := pc.Validate(); err != nil && strings.Contains(err.Error(), provider.EnvTimeout) {
		bad("%v", err)
	}
	if pc.Timeout <= 0 {
		bad("PROVIDER_TIMEOUT is not set: the deployed call timeout must be explicit")
	}
	calls := []struct {
		name string
		d    time.Duration
	}{
		{"PROVIDER_TIMEOUT", pc.Timeout},
		{"bedrock.DefaultTimeout", bedrock.DefaultTimeout},
		{"openai.DefaultTimeout", openai.DefaultTimeout},
		{"simulated.DefaultCallTimeout", simulated.DefaultCallTimeout},
		{"worker.DefaultCallTimeout", worker.DefaultCallTimeout},
	}
	for _, c := range calls {
		if need := c.d + margin + slack; fn.Timeout < need {
			bad("Timeout %v < %s %v + deadline margin %v + admission slack %v = %v: no record would be admitted",
				fn.Timeout, c.name, c.d, margin, slack, need)
		}
	}
	if fn.Timeout > maxLambdaTimeout {
		bad("Timeout %v > Lambda's maximum %v", fn.Timeout, maxLambdaTimeout)
	}

	if need := 6*fn.Timeout + e.MaxBatchingWindow; vt < need {
		bad("VisibilityTimeout %v < 6 × Timeout %v + batching window %v = %v", vt, fn.Timeout, e.MaxBatchingWindow, need)
	}

	lease := worker.DefaultLease
	if v := env("LEASE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			bad("LEASE_SECONDS = %q: want an integer", v)
		}
		lease = time.Duration(n) * time.Second
	}
	for _, l := range []struct {
		name string
		d    time.Duration
	}{{"LEASE_SECONDS", lease}, {"worker.DefaultLease", worker.DefaultLease}} {
		if after := l.d - l.d/3; after < margin {
			bad("%s %v: a lease outlives its last heartbeat by %v < deadline margin %v", l.name, l.d, after, margin)
		}
		if 2*l.d > vt {
			bad("%s %v: the heartbeat's visibility extension %v exceeds VisibilityTimeout %v", l.name, l.d, 2*l.d, vt)
		}
	}
	return out
}
