package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/testenv"
)

// A heartbeat is billed by what the heartbeats wrote, whatever else the
// worker wrote around the call. CI once priced it from the run's
// UpdateItem count: on a loaded moto a claim's reply came late, the
// call-start mark found under half a lease left and renewed the lease with
// a second write, and that write was counted as a heartbeat with no
// visibility extension (3.5 renewals per task, 0.86 SQS requests each).
// Here every claim's reply is held 0.6 of the lease, so every mark renews.
func TestHeartbeatExtraIgnoresTheWritesAroundTheCall(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var renewingMarks atomic.Int64
		slowClaim := func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("slowClaim", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if p, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && err == nil {
					switch expr := aws.ToString(p.UpdateExpression); {
					case strings.Contains(expr, "#attempts = #attempts + :one"): // Claim
						time.Sleep(extraLease * 6 / 10) // the injected latency of its reply
					case strings.Contains(expr, "#call_started_version") && strings.Contains(expr, "#lease_until"):
						renewingMarks.Add(1) // MarkCallStarted's second, renewing write
					}
				}
				return out, md, err
			}), middleware.After)
		}
		const tasks = 2
		beat, per, err := heartbeatExtra(ctx, &soak.Backend{Name: e.Backend, AWS: e.AWS}, Workloads[0], tasks, false, slowClaim)
		if err != nil {
			t.Fatal(err)
		}
		if n := renewingMarks.Load(); n < tasks {
			t.Fatalf("%d of %d call-start marks renewed the lease: the slow claim did not leave it short, the test proves nothing", n, tasks)
		}
		// The 100 B item bills 1 unit a write, and a submitted task is in
		// no index until the reconciler adopts it (none runs here), so a
		// renewal moving due_at writes no index: exactly 1 unit. A
		// mark's renewing write counted as a heartbeat would show as a
		// second write without its visibility extension.
		if beat.SQS != 1 || beat.WRU != 1 || per != ExtraBeats {
			t.Errorf("heartbeat: %g per task, each %g write units and %g SQS requests; want %d, exactly 1 unit (the item, no index) and exactly 1", per, beat.WRU, beat.SQS, ExtraBeats)
		}
	})
}
