package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// AdmissionScenario is one admission burst: Tasks submitted at once
// against a model limited to RPM requests and TPM tokens per minute.
type AdmissionScenario struct {
	Name      string
	Tasks     int
	RPM, TPM  int64
	MaxTokens int // the tasks' max_tokens (their estimate's output part)
}

// DefaultAdmissionScenarios: a burst of tasks (1,000 in `make bench`)
// against a request limit of a tenth of it per minute (100/min), and
// against a token limit of a tenth of the burst's estimates per minute.
// The token scenario's tasks ask for max_tokens 20, which the simulated
// provider fills (its replies are 24 words), so an estimate (8 prompt
// tokens + 20) is close to the usage (5 + 20) and the token limit binds.
func DefaultAdmissionScenarios(tasks int) []AdmissionScenario {
	return []AdmissionScenario{
		{Name: "requests-bound", Tasks: tasks, RPM: int64(max(tasks/10, 1)), TPM: 10_000_000, MaxTokens: 256},
		{Name: "tokens-bound", Tasks: tasks, RPM: 1_000_000, TPM: int64(max(tasks/10, 1)) * 28, MaxTokens: 20},
	}
}

// AdmissionRow is what one admission burst measured. Windows are
// one-minute windows on a virtual clock that the bench advances when every
// waiting task has been delivered once in the window (as SQS would, the
// worker hiding each waiting message until the next window): the counts
// are real DynamoDB conditional writes, no wall-clock minute is waited.
type AdmissionRow struct {
	Scenario AdmissionScenario
	// Windows is the number of windows until every task completed.
	Windows int
	// MaxCallsPerWindow and MaxTokensPerWindow are the most provider calls
	// started, and tokens the provider reported, in any one window.
	MaxCallsPerWindow  int
	MaxTokensPerWindow int64
	// ProviderCalls and Completed over the whole burst.
	ProviderCalls, Completed int
	// WaitingAttempts is Σ attempts − provider calls over all tasks: an
	// attempt consumed without a call (waiting must consume none).
	WaitingAttempts int
	// Waits is how many deliveries were not admitted.
	Waits int
	// AdmissionCalls counts the Admitter's DynamoDB calls (Admit, Settle,
	// a read after a lost reply) by operation; AdmissionWCU their write
	// units (each item < 1 KB: 1 per UpdateItem, a refused condition
	// included).
	AdmissionCalls map[string]int
	// WorkerCalls counts the worker's ledger calls by operation (claims,
	// completions, and the WaitAdmission of every wait).
	WorkerCalls map[string]int
	Elapsed     time.Duration
}

// AdmissionPerAdmittedCall is the admission's own calls per admitted
// (made) provider call: its Admit and, when the usage differed from the
// estimate, its Settle — refused Admits (one per wait) excluded.
func (r AdmissionRow) AdmissionPerAdmittedCall() float64 {
	if r.ProviderCalls == 0 {
		return 0
	}
	n := -r.Waits
	for _, c := range r.AdmissionCalls {
		n += c
	}
	return float64(n) / float64(r.ProviderCalls)
}

// vclock is the bench's virtual clock.
type vclock struct{ ms atomic.Int64 }

func (c *vclock) Now() time.Time  { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *vclock) Set(t time.Time) { c.ms.Store(t.UnixMilli()) }

// windowed wraps the provider and records calls and reported tokens per
// window of the virtual clock.
type windowed struct {
	*simulated.Provider
	clock *vclock
	mu    sync.Mutex
	calls map[int64]int
	toks  map[int64]int64
}

func (w *windowed) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	win := w.clock.Now().Unix() / 60
	w.mu.Lock()
	w.calls[win]++
	w.mu.Unlock()
	res, err := w.Provider.Generate(ctx, req)
	var out contract.GenerateOutput
	if err == nil && json.Unmarshal(res.Output, &out) == nil {
		w.mu.Lock()
		w.toks[win] += int64(out.Usage.InputTokens + out.Usage.OutputTokens)
		w.mu.Unlock()
	}
	return res, err
}

// admissionRun runs one burst on a fresh stack.
func admissionRun(ctx context.Context, b *soak.Backend, sc AdmissionScenario, workers int) (AdmissionRow, error) {
	row := AdmissionRow{Scenario: sc}
	env, drop, err := b.NewEnv(ctx, "benchadm")
	if err != nil {
		return row, err
	}
	defer drop()
	counted := func(c *awsclient.Counter) aws.Config {
		cc := b.AWS.Copy()
		cc.APIOptions = append(append([]func(*middleware.Stack) error{}, b.AWS.APIOptions...), c.Register)
		return cc
	}
	admCounter, workCounter := awsclient.NewCounter(), awsclient.NewCounter()
	clock := &vclock{}
	clock.Set(time.Now().UTC().Truncate(time.Minute))
	lcfg := ledger.Config{TasksTable: env.Names.TasksTable, ReviewTable: env.Names.ReviewTable, Now: clock.Now}
	setupLedger, err := ledger.New(awsclient.DynamoDB(b.AWS), lcfg)
	if err != nil {
		return row, err
	}
	workLedger, err := ledger.New(awsclient.DynamoDB(counted(workCounter)), lcfg)
	if err != nil {
		return row, err
	}
	sim := simulated.New(simulated.Options{Seed: 1})
	prov := &windowed{Provider: sim, clock: clock, calls: map[int64]int{}, toks: map[int64]int64{}}
	adm, err := admission.New(admission.Config{
		DB: awsclient.DynamoDB(counted(admCounter)), TasksTable: env.Names.TasksTable, Now: clock.Now,
		Limits: map[string]admission.Limit{simulated.DefaultModel: {RequestsPerWindow: sc.RPM, TokensPerWindow: sc.TPM}},
	})
	if err != nil {
		return row, err
	}
	h := &worker.Handler{
		Ledger: workLedger, Provider: prov, Policy: retrypolicy.Default(), Lease: worker.DefaultLease,
		Admission: &worker.Admission{Admitter: adm, Model: simulated.DefaultModel},
	}

	input := fmt.Sprintf(`{"prompt":"write one line about admission","max_tokens":%d}`, sc.MaxTokens)
	ids := make([]string, sc.Tasks)
	if err := parallel(sc.Tasks, workers, func(i int) error {
		t, err := setupLedger.Create(ctx, ledger.NewTask{Scope: "bench", IdempotencyKey: "adm-" + strconv.Itoa(i),
			Kind: contract.KindGenerate, Input: input, PayloadSHA256: "sha-" + strconv.Itoa(i)})
		if err != nil {
			return err
		}
		ids[i] = t.TaskID
		return nil
	}); err != nil {
		return row, err
	}
	admCounter.Reset()
	workCounter.Reset()

	start := time.Now()
	pending := ids
	for len(pending) > 0 {
		if row.Windows >= sc.Tasks+2 { // at least one call per window is always admitted

			return row, fmt.Errorf("bench: admission %s: %d tasks still pending after %d windows", sc.Name, len(pending), row.Windows)
		}
		row.Windows++
		var mu sync.Mutex
		var next []string
		batches := (len(pending) + 9) / 10
		if err := parallel(batches, workers, func(i int) error {
			batch := pending[i*10 : min(i*10+10, len(pending))]
			ev := events.SQSEvent{}
			task := map[string]string{} // message id → task id
			for j, id := range batch {
				m := fmt.Sprintf("w%d-%d-%d", row.Windows, i, j)
				task[m] = id
				ev.Records = append(ev.Records, events.SQSMessage{MessageId: m, Body: fmt.Sprintf(`{"task_id":%q}`, id)})
			}
			resp, err := h.Handle(ctx, ev)
			if err != nil {
				return err
			}
			failed := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range ev.Records {
				if failed[r.MessageId] {
					next = append(next, task[r.MessageId])
				}
			}
			return nil
		}); err != nil {
			return row, err
		}
		row.Waits += len(next)
		pending = next
		clock.Set(clock.Now().Truncate(time.Minute).Add(time.Minute)) // the next window
	}
	row.Elapsed = time.Since(start)

	for _, n := range prov.calls {
		row.ProviderCalls += n
		row.MaxCallsPerWindow = max(row.MaxCallsPerWindow, n)
	}
	for _, n := range prov.toks {
		row.MaxTokensPerWindow = max(row.MaxTokensPerWindow, n)
	}
	attempts := 0
	for _, id := range ids {
		t, err := setupLedger.Get(ctx, id)
		if err != nil {
			return row, err
		}
		attempts += t.Attempts
		if t.State == ledger.StateCompleted {
			row.Completed++
		}
	}
	row.WaitingAttempts = attempts - row.ProviderCalls
	row.AdmissionCalls = admCounter.Calls()
	row.WorkerCalls = workCounter.Calls()
	return row, nil
}

// writeAdmissionTable prints the admission section.
func writeAdmissionTable(w io.Writer, rows []AdmissionRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nprovider admission: a burst against per-minute limits far below it (virtual one-minute windows, real conditional writes)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\ttasks\tlimit rpm/tpm\twindows\tmax calls/window\tmax tokens/window\tcompleted\tattempts spent waiting\twaits\t")
	for _, r := range rows {
		s := r.Scenario
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", s.Name, s.Tasks, s.RPM, s.TPM, r.Windows,
			r.MaxCallsPerWindow, r.MaxTokensPerWindow, r.Completed, r.WaitingAttempts, r.Waits)
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tadmission UpdateItem\tof which refused\tadmission GetItem\tper admitted call (calls = WCU)\tper wait: admission + worker UpdateItem (= WCU)\telapsed\t")
	for _, r := range rows {
		perWait := 0.0
		if r.Waits > 0 {
			// Worker writes beyond the admitted calls' claim + complete:
			// each wait's claim and WaitAdmission.
			perWait = 1 + float64(r.WorkerCalls["DynamoDB.UpdateItem"]-2*r.ProviderCalls)/float64(r.Waits)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t\n", r.Scenario.Name, r.AdmissionCalls["DynamoDB.UpdateItem"], r.Waits,
			r.AdmissionCalls["DynamoDB.GetItem"], r.AdmissionPerAdmittedCall(), perWait, r.Elapsed.Round(time.Millisecond))
	}
	_ = tw.Flush()
	ok := true
	for _, r := range rows {
		ok = ok && int64(r.MaxCallsPerWindow) <= r.Scenario.RPM && r.MaxTokensPerWindow <= r.Scenario.TPM && r.WaitingAttempts == 0 && r.Completed == r.Scenario.Tasks
	}
	if ok {
		fmt.Fprintln(w, "=> no window exceeded its limit, no attempt was spent waiting, every task completed; per admitted call: 1 Admit + 1 Settle when the usage differs from the estimate; a wait costs a claim, a refused Admit and a WaitAdmission")
	} else {
		fmt.Fprintln(w, "=> ADMISSION VIOLATION: a window exceeded its limit, an attempt was spent waiting, or a task did not complete")
	}
}
