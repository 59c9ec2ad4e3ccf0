package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	ebdest "github.com/taskledger/taskledger/internal/destination/eventbridge"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// throttledBus is EventBridge answering PutEvents HTTP 200 with the one
// entry rejected ThrottlingException: the service's own word that the
// event was not put (FailedEntryCount 1, no event id).
type throttledBus struct{ calls atomic.Int64 }

func (b *throttledBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls.Add(1)
	return &eventbridge.PutEventsOutput{FailedEntryCount: 1, Entries: []ebtypes.PutEventsResultEntry{{
		ErrorCode: aws.String("ThrottlingException"), ErrorMessage: aws.String("Rate exceeded"),
	}}}, nil
}

// TestEventBridgeEntryThrottleIsARefusal: Refused recognises a throttle by
// a status in the chain, an AWS ErrorCode() in the chain, or a
// classification reason "http_429"/"aws_<code>". The EventBridge adapter
// reports a per-entry ThrottlingException (HTTP 200, the entry not put) as
// retrypolicy.Throttled(*EntryError) — no status, reason
// "steered_transient" — so the entry error must carry its code for Refused
// to say "refused", as for Bedrock's throttle
// (TestBedrockThrottleIsADefiniteRefusal).
//
//	lapsed: the reconciler expires the slow worker's lease (unknown at v)
//	        before its ScheduleRetry; the worker's refusal settles it:
//	        retry_wait. Left to the reconciler, EventBridge having no
//	        readback, it would be parked unknown_outcome: "the event may be
//	        on the bus" — false, and the operator, told a re-send may
//	        duplicate it, may well close it: an event that was never put
//	        would be lost.
//	cancel: a cancel while running lands before the write → ended
//	        cancelled "refused, did not act", not parked unknown_outcome.
func TestEventBridgeEntryThrottleIsARefusal(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"lapsed", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				bus := &throttledBus{}
				d, err := ebdest.New(ebdest.Options{BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/orders", Client: bus, Now: b.clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				reg, err := deliver.NewRegistry(d)
				if err != nil {
					t.Fatal(err)
				}
				b.h.Destinations = reg
				task := b.create(t, "eb-throttle-"+mode,
					`{"destination":"eventbridge","params":{},"payload":{"order":"O-1"}}`,
					func(n *ledger.NewTask) { n.Kind = destination.KindDeliver })

				step := deliver.Bind(reg, deliver.Task{TaskID: "probe-" + mode, Input: task.Input, Provenance: deliver.ProvenanceOf(task)})
				_, perr := step.Generate(ctx, contract.Request{OperationID: "probe-" + mode, Attempt: 1})
				if cl := retrypolicy.Classify(perr); cl.Class != retrypolicy.Transient {
					t.Fatalf("setup: entry throttle classified %+v (%v); want transient", cl, perr)
				}
				refused := retrypolicy.Refused(perr)
				bus.calls.Store(0)

				raced := raceTheSave(t, b, task.TaskID, mode)
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))
				raced()
				if n := bus.calls.Load(); n != 1 {
					t.Fatalf("setup: %d PutEvents calls; want 1", n)
				}
				wantRefusalSettled(t, b, task.TaskID, mode, func() { b.reconcileDeliveries(t, reg) },
					fmt.Sprintf("EventBridge rejected the entry ThrottlingException (not put; Refused=%v), as any other throttle (DESIGN §1.4, §1.6)", refused))
			})
		})
	}
}
