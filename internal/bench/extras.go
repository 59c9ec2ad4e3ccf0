package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

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
//     ExtraBeats heartbeats at a short lease, minus the mark row, divided
//     by the renewals the worker made (its UpdateItem calls beyond the
//     mark row's).
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

	beats := newBeatCounter()
	held, err := runTaskledger(ctx, b, w, tasks, tlRun{
		claimCheck: claimCheck,
		provider: func(*costRig) contract.Provider {
			return beatHolder{Provider: simulated.New(simulated.Options{Seed: 1, NoIdempotency: true, NoReadback: true}), beats: ExtraBeats, seen: beats}
		},
		lease: extraLease,
		extra: []func(*middleware.Stack) error{beats.register},
	})
	if err != nil {
		return x, fmt.Errorf("heartbeat: %w", err)
	}
	renewals := held.Calls["DynamoDB.UpdateItem"] - marked.Calls["DynamoDB.UpdateItem"]
	if renewals < ExtraBeats {
		return x, fmt.Errorf("heartbeat: %g renewals per task, want ≥ %d (the calls were held for them)", renewals, ExtraBeats)
	}
	x.Beats = renewals
	x.Beat = Extra{WRU: (held.WRU - marked.WRU) / renewals, SQS: (held.SQS - marked.SQS) / renewals}
	return x, nil
}

// beatHolder holds each generation until the worker has made beats more
// heartbeats (seen), then generates: a call that lasts beats × lease/3.
type beatHolder struct {
	*simulated.Provider
	beats int
	seen  *beatCounter
}

func (h beatHolder) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	if err := h.seen.await(ctx, h.seen.count()+h.beats); err != nil {
		return contract.Result{}, err
	}
	return h.Provider.Generate(ctx, req)
}

// beatCounter counts heartbeats as the worker's visibility extensions (the
// heartbeat extends the message's visibility after each renewal that got
// through; nothing else the happy path does sets a visibility above zero).
type beatCounter struct{ *progress }

func newBeatCounter() *beatCounter { return &beatCounter{newProgress("heartbeats")} }

func (c *beatCounter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benchBeats", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleInitialize(ctx, in)
		if p, ok := in.Parameters.(*sqs.ChangeMessageVisibilityInput); ok && err == nil && p.VisibilityTimeout > 0 &&
			awsmiddleware.GetServiceID(ctx) == "SQS" {
			c.add(1)
		}
		return out, md, err
	}), middleware.After)
}
