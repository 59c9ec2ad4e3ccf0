package bench

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/soak"
)

// ExtraWorkloads are the workloads whose per-attempt extras are measured:
// a small item, and the largest inline input (where every write of the
// item before the claim-check bills the whole input).
var ExtraWorkloads = []string{"100 B input", "30 KB input"}

// ExtraBeats is how many heartbeats each task of the heartbeat run holds
// its provider call for.
const ExtraBeats = 3

// extraLease is the worker's lease in the heartbeat run: heartbeats every
// extraLease/3, so the run holds each call for about one lease.
const extraLease = 300 * time.Millisecond

// Extra is what one occurrence of a write beyond the idempotent happy
// path bills.
type Extra struct {
	WRU, SQS float64
	// GBSeconds is the Lambda time the extra adds to the invocation: the
	// call-start mark runs before the provider call; a heartbeat runs
	// beside it and adds none.
	GBSeconds float64
}

// USDPerMillion prices a million occurrences.
func (e Extra) USDPerMillion(p Prices) float64 {
	return (e.WRU*p.WriteRequestUnit + e.SQS*p.SQSRequest + e.GBSeconds*p.LambdaGBSecond) * 1e6
}

// AttemptExtras are the writes an attempt makes beyond the idempotent
// happy path (1 claim + 1 complete), measured on the emulator through the
// same submit → SQS → worker path as the cost rows:
//
//   - Mark: the call-start mark (ledger.MarkCallStarted), written before
//     every call to a provider that does not honour idempotency keys —
//     Bedrock and OpenAI-compatible servers among them. Measured as the
//     row of the unforgiving simulated provider (NoIdempotency,
//     NoReadback) minus the idempotent row of the same workload.
//   - Beat: one heartbeat, made every lease/3 while a call runs (10 s with
//     the default 30 s lease): the lease renewal (ledger.Renew) and the
//     message's visibility extension. Measured by holding each call for
//     ExtraBeats heartbeats at a short lease, and metering the worker
//     between heartbeats while the call is held (beatCounter): exactly
//     the renewals and extensions, none of the writes around the call.
type AttemptExtras struct {
	Workload string
	System   string // SystemBefore or SystemAfter
	Mark     Extra
	Beat     Extra
	// Beats are the heartbeats measured per task.
	Beats float64
	// Marked is the mark row (the unforgiving provider, no heartbeat).
	Marked CostRow
}

// attemptExtras measures the extras of workload w, before or after the
// claim-check; plain is the idempotent row of the same workload and
// system, measured in the same run.
func attemptExtras(ctx context.Context, b *soak.Backend, w Workload, tasks int, claimCheck bool, plain CostRow) (AttemptExtras, error) {
	x := AttemptExtras{Workload: w.Name, System: plain.System}
	unforgiving := func(*costRig) contract.Provider {
		return simulated.New(simulated.Options{Seed: 1, NoIdempotency: true, NoReadback: true})
	}
	marked, err := runTaskledger(ctx, b, w, tasks, tlRun{claimCheck: claimCheck, provider: unforgiving})
	if err != nil {
		return x, fmt.Errorf("call-start mark: %w", err)
	}
	x.Marked = marked
	if d := marked.Calls["DynamoDB.UpdateItem"] - plain.Calls["DynamoDB.UpdateItem"]; math.Abs(d-1) > 1e-9 {
		return x, fmt.Errorf("call-start mark: %g UpdateItem per task more than the idempotent provider's, want 1 (the mark)", d)
	}
	x.Mark = Extra{WRU: marked.WRU - plain.WRU, SQS: marked.SQS - plain.SQS, GBSeconds: marked.GBSeconds - plain.GBSeconds}

	x.Beat, x.Beats, err = heartbeatExtra(ctx, b, w, tasks, claimCheck)
	if err != nil {
		return x, fmt.Errorf("heartbeat: %w", err)
	}
	return x, nil
}

// heartbeatExtra measures one heartbeat of workload w: each of tasks calls
// to the unforgiving provider is held for ExtraBeats heartbeats at a short
// lease (extraLease) and the worker metered between them (beatCounter).
// It returns the heartbeat's bill and the heartbeats measured per task.
// extra is more middleware on every component's clients (tests: faults).
func heartbeatExtra(ctx context.Context, b *soak.Backend, w Workload, tasks int, claimCheck bool, extra ...func(*middleware.Stack) error) (Extra, float64, error) {
	beats := newBeatCounter()
	if _, err := runTaskledger(ctx, b, w, tasks, tlRun{
		claimCheck: claimCheck,
		provider: func(g *costRig) contract.Provider {
			beats.watch(g.meter["worker"], g.counter["worker"])
			return beatHolder{Provider: simulated.New(simulated.Options{Seed: 1, NoIdempotency: true, NoReadback: true}), beats: ExtraBeats, seen: beats}
		},
		lease: extraLease,
		extra: append([]func(*middleware.Stack) error{beats.register}, extra...),
	}); err != nil {
		return Extra{}, 0, err
	}
	u, n, renewals := beats.measured()
	if n < tasks*ExtraBeats {
		return Extra{}, 0, fmt.Errorf("%d heartbeats measured in %d tasks, want ≥ %d each (the calls were held for them)", n, tasks, ExtraBeats)
	}
	if renewals != n {
		return Extra{}, 0, fmt.Errorf("%d UpdateItem calls in the windows of %d heartbeats, want one renewal each (something else wrote while the calls were held)", renewals, n)
	}
	return Extra{WRU: u.WRU / float64(n), SQS: u.SQSRequests / float64(n)}, float64(n) / float64(tasks), nil
}

// beatHolder holds each generation until the worker has made beats + 2
// more heartbeats (seen) and measures the last beats of them, then
// generates: a call that lasts (beats + 2) × lease/3.
type beatHolder struct {
	*simulated.Provider
	beats int
	seen  *beatCounter
}

func (h beatHolder) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	// The first heartbeat measured is the second whose visibility
	// extension begins after this call did: the first may have begun
	// before, while the worker's own writes (the mark, a renewal before
	// the call) were still going.
	from := h.seen.count() + 2
	to := from + h.beats
	if err := h.seen.await(ctx, to); err != nil {
		return contract.Result{}, err
	}
	h.seen.measure(from, to)
	return h.Provider.Generate(ctx, req)
}

// beatCounter counts heartbeats as the worker's visibility extensions (the
// heartbeat extends the message's visibility after each renewal that got
// through; nothing else the happy path does sets a visibility above zero).
//
// It also measures what heartbeats bill, exactly, whatever the timing: as
// each counted extension begins it snapshots the worker's meter and call
// counter (watch). Between the snapshots of heartbeats k and k+n the
// worker made n extensions (k … k+n−1) and n renewals (k+1 … k+n), and —
// while a beatHolder holds the call — nothing else: the worker's own
// writes around the call (the call-start mark's renewing write, a renewal
// before the call, a renewal the call's end cut short of its extension)
// fall outside every window, where a count of the run's UpdateItem calls
// took them for heartbeats (CI: 3.5 renewals per task, 0.86 SQS requests
// each, on a loaded moto).
type beatCounter struct {
	*progress

	mu      sync.Mutex
	meter   *meter
	counter *awsclient.Counter
	at      []beatSnapshot // at[k-1]: as heartbeat k's extension began
	sum     usage          // over the measured windows
	n       int            // heartbeats in them
	renews  int            // UpdateItem calls in them
}

type beatSnapshot struct {
	u       usage
	updates int
}

func newBeatCounter() *beatCounter { return &beatCounter{progress: newProgress("heartbeats")} }

// watch sets the worker's meter and call counter the snapshots read.
func (c *beatCounter) watch(m *meter, counter *awsclient.Counter) {
	c.mu.Lock()
	c.meter, c.counter = m, counter
	c.mu.Unlock()
}

func (c *beatCounter) snapshot() beatSnapshot {
	c.mu.Lock()
	m, counter := c.meter, c.counter
	c.mu.Unlock()
	var s beatSnapshot
	if m != nil {
		s.u = m.usage()
	}
	if counter != nil {
		s.updates = counter.Calls()["DynamoDB.UpdateItem"]
	}
	return s
}

// measure adds the window from heartbeat from to heartbeat to (both
// counted).
func (c *beatCounter) measure(from, to int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, b := c.at[from-1], c.at[to-1]
	d := b.u
	d.sub(a.u)
	c.sum.add(d)
	c.n += to - from
	c.renews += b.updates - a.updates
}

// measured returns what the measured heartbeats billed in all, how many
// there were, and the UpdateItem calls made in their windows.
func (c *beatCounter) measured() (usage, int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum, c.n, c.renews
}

func (c *beatCounter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benchBeats", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		p, ok := in.Parameters.(*sqs.ChangeMessageVisibilityInput)
		if !ok || p.VisibilityTimeout <= 0 || awsmiddleware.GetServiceID(ctx) != "SQS" {
			return next.HandleInitialize(ctx, in)
		}
		// Before the call: the meter (outside this middleware) records the
		// extension when it returns, after the snapshot.
		s := c.snapshot()
		out, md, err := next.HandleInitialize(ctx, in)
		if err == nil {
			c.mu.Lock()
			c.at = append(c.at, s)
			c.mu.Unlock()
			c.add(1)
		}
		return out, md, err
	}), middleware.After)
}
