package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
// The token scenario's tasks ask for max_tokens 20; the estimate is the
// most a call can use (contract.CallMaximum: prompt bytes + 32 + 20 = 82),
// far above what the simulated provider reports (5 + 20), so the token
// limit binds on the estimates held while calls run and frees room as
// they settle.
func DefaultAdmissionScenarios(tasks int) []AdmissionScenario {
	est := admissionEstimate(20)
	return []AdmissionScenario{
		{Name: "requests-bound", Tasks: tasks, RPM: int64(max(tasks/10, 1)), TPM: 10_000_000, MaxTokens: 256},
		{Name: "tokens-bound", Tasks: tasks, RPM: 1_000_000, TPM: int64(max(tasks/10, 1)) * est, MaxTokens: 20},
	}
}

const admissionPrompt = "write one line about admission"

func admissionInput(maxTokens int) string {
	return fmt.Sprintf(`{"prompt":%q,"max_tokens":%d}`, admissionPrompt, maxTokens)
}

// admissionEstimate is the worker's admission estimate of the bench's task.
func admissionEstimate(maxTokens int) int64 {
	return (&worker.Admission{}).Estimate(admissionInput(maxTokens))
}

// AdmissionRow is what one admission burst measured, on a virtual clock:
// each round delivers every waiting message that is visible (its
// not_before reached: the worker hides a waiting message until then, as
// SQS would), then the clock moves to the earliest not_before of the
// rest. The counts are real DynamoDB conditional writes; no wall-clock
// minute is waited.
type AdmissionRow struct {
	Scenario AdmissionScenario
	// Rounds is the number of delivery rounds until every task completed;
	// Span the virtual time from the first call to the last.
	Rounds int
	Span   time.Duration
	// MaxCallsPerMinute and MaxTokensPerMinute are the most provider calls
	// started, and tokens the provider reported, in any span of 60 s (a
	// rolling minute, not only calendar minutes).
	MaxCallsPerMinute  int
	MaxTokensPerMinute int64
	// ProviderCalls and Completed over the whole burst.
	ProviderCalls, Completed int
	// WaitingAttempts is Σ attempts − provider calls over all tasks: an
	// attempt consumed without a call (waiting must consume none).
	WaitingAttempts int
	// Waits is how many deliveries were not admitted.
	Waits int
	// AdmissionCalls counts the Admitter's DynamoDB calls (Admit, Settle,
	// the seal of the previous window, a read after a lost reply) by
	// operation; each is 1 write unit (items < 1 KB), a refused condition
	// included. AdmissionRefused is how many of the UpdateItems were
	// refused (a wait decided by the previous window alone makes none).
	AdmissionCalls   map[string]int
	AdmissionRefused int
	// WorkerCalls counts the worker's ledger calls by operation (claims,
	// completions, and the WaitAdmission of every wait).
	WorkerCalls map[string]int
	Elapsed     time.Duration
}

// AdmissionPerAdmittedCall is the admission's own calls per admitted
// (made) provider call: its Admit, its Settle when the usage differed from
// the estimate, and the seals (one per minute) — refused Admits excluded.
func (r AdmissionRow) AdmissionPerAdmittedCall() float64 {
	if r.ProviderCalls == 0 {
		return 0
	}
	n := -r.AdmissionRefused
	for _, c := range r.AdmissionCalls {
		n += c
	}
	return float64(n) / float64(r.ProviderCalls)
}

// throughput is the calls made as a share of what the request limit
// allows from the first call to a minute after the last (the limit times
// (span + 60 s) / 60 s) — what the rolling bound costs against counting
// calendar minutes alone (100% in this bench's bursts).
func (r AdmissionRow) throughput() string {
	if r.ProviderCalls == 0 || r.Scenario.RPM >= 1_000_000 {
		return "-"
	}
	allowed := float64(r.Scenario.RPM) * (r.Span + time.Minute).Minutes()
	return fmt.Sprintf("%.0f%%", 100*float64(r.ProviderCalls)/allowed)
}

// vclock is the bench's virtual clock.
type vclock struct{ ms atomic.Int64 }

func (c *vclock) Now() time.Time  { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *vclock) Set(t time.Time) { c.ms.Store(t.UnixMilli()) }

// windowed wraps the provider and records each call's virtual start time
// and the tokens it reported.
type windowed struct {
	*simulated.Provider
	clock *vclock
	mu    sync.Mutex
	calls []providerCall
}

type providerCall struct {
	at     time.Time
	tokens int64
}

func (w *windowed) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	at := w.clock.Now()
	res, err := w.Provider.Generate(ctx, req)
	c := providerCall{at: at}
	var out contract.GenerateOutput
	if err == nil && json.Unmarshal(res.Output, &out) == nil {
		c.tokens = int64(out.Usage.InputTokens + out.Usage.OutputTokens)
	}
	w.mu.Lock()
	w.calls = append(w.calls, c)
	w.mu.Unlock()
	return res, err
}

// rollingMax returns the most calls, and tokens, in any 60 s span.
func rollingMax(calls []providerCall) (n int, tokens int64) {
	sort.Slice(calls, func(i, j int) bool { return calls[i].at.Before(calls[j].at) })
	lo, sum := 0, int64(0)
	for hi, c := range calls {
		sum += c.tokens
		for calls[lo].at.Add(time.Minute).Compare(c.at) <= 0 {
			sum -= calls[lo].tokens
			lo++
		}
		n, tokens = max(n, hi-lo+1), max(tokens, sum)
	}
	return n, tokens
}

// refusalCounter wraps the Admitter's DynamoDB client and counts the
// UpdateItems refused by their condition.
type refusalCounter struct {
	admission.DB
	refused atomic.Int64
}

func (r *refusalCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := r.DB.UpdateItem(ctx, in, opts...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		r.refused.Add(1)
	}
	return out, err
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
	lcfg := ledger.Config{TasksTable: env.Names.TasksTable, ReviewTable: env.Names.ReviewTable, WatchTable: env.Names.WatchTable, Now: clock.Now}
	setupLedger, err := ledger.New(awsclient.DynamoDB(b.AWS), lcfg)
	if err != nil {
		return row, err
	}
	workLedger, err := ledger.New(awsclient.DynamoDB(counted(workCounter)), lcfg)
	if err != nil {
		return row, err
	}
	sim := simulated.New(simulated.Options{Seed: 1})
	prov := &windowed{Provider: sim, clock: clock}
	admDB := &refusalCounter{DB: awsclient.DynamoDB(counted(admCounter))}
	adm, err := admission.New(admission.Config{
		DB: admDB, TasksTable: env.Names.TasksTable, Now: clock.Now,
		Limits: map[string]admission.Limit{simulated.DefaultModel: {RequestsPerWindow: sc.RPM, TokensPerWindow: sc.TPM}},
	})
	if err != nil {
		return row, err
	}
	h := &worker.Handler{
		Ledger: workLedger, Provider: prov, Policy: retrypolicy.Default(), Lease: worker.DefaultLease,
		Admission: &worker.Admission{Admitter: adm, Model: simulated.DefaultModel},
	}

	input := admissionInput(sc.MaxTokens)
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
	notBefore := map[string]int64{}
	for len(pending) > 0 {
		if row.Rounds >= 4*sc.Tasks+4 { // at least one call per round of two windows is always admitted
			return row, fmt.Errorf("bench: admission %s: %d tasks still pending after %d rounds", sc.Name, len(pending), row.Rounds)
		}
		row.Rounds++
		// The clock moves to the earliest moment a waiting message is
		// visible again; only those messages are delivered.
		if len(notBefore) > 0 {
			earliest := int64(math.MaxInt64)
			for _, id := range pending {
				earliest = min(earliest, notBefore[id])
			}
			clock.Set(time.UnixMilli(max(earliest, clock.Now().UnixMilli())))
		}
		var visible, hidden []string
		for _, id := range pending {
			if notBefore[id] <= clock.Now().UnixMilli() {
				visible = append(visible, id)
			} else {
				hidden = append(hidden, id)
			}
		}
		var mu sync.Mutex
		next := hidden
		batches := (len(visible) + 9) / 10
		if err := parallel(batches, workers, func(i int) error {
			batch := visible[i*10 : min(i*10+10, len(visible))]
			ev := events.SQSEvent{}
			task := map[string]string{} // message id → task id
			for j, id := range batch {
				m := fmt.Sprintf("w%d-%d-%d", row.Rounds, i, j)
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
		row.Waits += len(next) - len(hidden)
		pending = next
		for _, id := range pending {
			t, err := setupLedger.Get(ctx, id)
			if err != nil {
				return row, err
			}
			notBefore[id] = t.NotBefore
		}
	}
	row.Elapsed = time.Since(start)

	row.ProviderCalls = len(prov.calls)
	row.MaxCallsPerMinute, row.MaxTokensPerMinute = rollingMax(prov.calls)
	if n := len(prov.calls); n > 0 {
		row.Span = prov.calls[n-1].at.Sub(prov.calls[0].at)
	}
	row.AdmissionRefused = int(admDB.refused.Load())
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
	fmt.Fprintln(w, "\nprovider admission: a burst against per-minute limits far below it (virtual clock, real conditional writes; maxima over any 60 s span)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\ttasks\tlimit rpm/tpm\trounds\tvirtual span\tmax calls/60 s\tmax tokens/60 s\tthroughput of the limit\tcompleted\tattempts spent waiting\twaits\t")
	for _, r := range rows {
		s := r.Scenario
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%d\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t\n", s.Name, s.Tasks, s.RPM, s.TPM, r.Rounds, r.Span.Round(time.Second),
			r.MaxCallsPerMinute, r.MaxTokensPerMinute, r.throughput(), r.Completed, r.WaitingAttempts, r.Waits)
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tadmission UpdateItem\tof which refused\tadmission GetItem\tper admitted call (calls = WCU)\tper wait: admission + worker UpdateItem (= WCU)\telapsed\t")
	for _, r := range rows {
		perWait := 0.0
		if r.Waits > 0 {
			// Worker writes beyond the admitted calls' claim + complete:
			// each wait's claim and WaitAdmission.
			perWait = float64(r.AdmissionRefused+r.WorkerCalls["DynamoDB.UpdateItem"]-2*r.ProviderCalls) / float64(r.Waits)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t\n", r.Scenario.Name, r.AdmissionCalls["DynamoDB.UpdateItem"], r.AdmissionRefused,
			r.AdmissionCalls["DynamoDB.GetItem"], r.AdmissionPerAdmittedCall(), perWait, r.Elapsed.Round(time.Millisecond))
	}
	_ = tw.Flush()
	ok := true
	for _, r := range rows {
		ok = ok && int64(r.MaxCallsPerMinute) <= r.Scenario.RPM && r.MaxTokensPerMinute <= r.Scenario.TPM && r.WaitingAttempts == 0 && r.Completed == r.Scenario.Tasks
	}
	if ok {
		fmt.Fprintln(w, "=> no 60 s span exceeded its limit, no attempt was spent waiting, every task completed; per admitted call: 1 Admit + 1 Settle when the usage differs from the estimate + a seal per minute; a wait costs a claim, a refused Admit (none when the previous minute alone decides) and a WaitAdmission")
	} else {
		fmt.Fprintln(w, "=> ADMISSION VIOLATION: a window exceeded its limit, an attempt was spent waiting, or a task did not complete")
	}
}
