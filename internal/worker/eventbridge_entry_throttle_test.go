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

// lThrottledBus is EventBridge answering PutEvents HTTP 200 with the one
// entry rejected ThrottlingException: the service's own word that the
// event was not put (FailedEntryCount 1, no event id).
type lThrottledBus struct{ calls atomic.Int64 }

func (b *lThrottledBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls.Add(1)
	return &eventbridge.PutEventsOutput{FailedEntryCount: 1, Entries: []ebtypes.PutEventsResultEntry{{
		ErrorCode: aws.String("ThrottlingException"), ErrorMessage: aws.String("Rate exceeded"),
	}}}, nil
}

// TestAttackReviewLEventBridgeEntryThrottleIsNoRefusal (adversarial review
// l, commit 97cdd2b): Refused recognises a throttle by a status in the
// chain, an AWS ErrorCode() in the chain, or a classification reason
// "http_429"/"aws_<code>". The EventBridge adapter reports a per-entry
// ThrottlingException (HTTP 200, the entry not put) as
// retrypolicy.Throttled(*EntryError) — no status, no ErrorCode() method,
// reason "steered_transient" — so Refused says false: "sent, may have
// acted". It is review K's Bedrock-throttle defect again, for the other
// AWS adapter the fix did not look at.
//
//	lapsed: the reconciler expires the slow worker's lease (unknown at v)
//	        before its ScheduleRetry; without AfterRefusal the write is
//	        fenced; EventBridge has no readback, so the reconciler parks
//	        unknown_outcome: "the event may be on the bus" — false, and
//	        the operator, told a re-send may duplicate it, may well close
//	        it: an event that was never put is lost. Want retry_wait.
//	cancel: a cancel while running lands before the write → not ended
//	        cancelled "refused, did not act" but parked unknown_outcome.
func TestAttackReviewLEventBridgeEntryThrottleIsNoRefusal(t *testing.T) {
	for _, mode := range []string{"lapsed", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				bus := &lThrottledBus{}
				d, err := ebdest.New(ebdest.Options{BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/orders", Client: bus, Now: b.clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				reg, err := deliver.NewRegistry(d)
				if err != nil {
					t.Fatal(err)
				}
				b.h.Destinations = reg
				task := b.create(t, "l-eb-throttle-"+mode,
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
