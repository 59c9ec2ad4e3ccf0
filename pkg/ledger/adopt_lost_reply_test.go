package ledger_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// A worker's claim of a watched (unindexed) task whose reply is lost
// inside the SDK's retry loop is still recognised as its own when the
// reconciler adopts the task between the applied write and the SDK's
// repeat. Adopt is bookkeeping of the index only: if it replaced the
// task's write_nonce, the repeat's refusal would carry a nonce that is
// not the claim's, the worker would read its own live lease as another's
// (ReasonLeased), acknowledge the message as a duplicate and leave the
// task running under a lease nobody holds, its attempt spent, until the
// reconciler expires it (for a provider without readback: a park saying
// the provider may have acted, though it was never called).
func TestClaimRecognisesItsOwnWriteWhenAnAdoptLandsBeforeTheSDKRepeat(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, func(c *ledger.Config) { c.WatchTable = e.Names.WatchTable })
		task := mustCreate(t, b, "adopt-between-claim-and-repeat")
		if task.StateShard != "" {
			t.Fatalf("watched submit indexed: %q", task.StateShard)
		}
		// The worker's client: the first UpdateItem's reply is lost after
		// the write was applied (a 500: the SDK repeats it), and the
		// reconciler's adopt lands in between, on its own client.
		var armed atomic.Bool
		var adopted atomic.Bool
		cfg := b.env.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
			return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("adoptThenLoseReply",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleDeserialize(ctx, in)
					if err == nil && awsmiddleware.GetOperationName(ctx) == "UpdateItem" && armed.CompareAndSwap(true, false) {
						cur, gerr := b.l.Get(context.Background(), task.TaskID)
						if gerr != nil {
							return out, md, gerr
						}
						if _, ok, aerr := b.l.Adopt(context.Background(), cur); aerr != nil || !ok {
							return out, md, errors.Join(errors.New("adopt of the claimed task was not applied"), aerr)
						}
						adopted.Store(true)
						resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 500, Header: http.Header{}}}
						return out, md, &smithyhttp.ResponseError{Response: resp, Err: errors.New("connection reset after the write")}
					}
					return out, md, err
				}), middleware.After)
		})
		worker, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		got, err := worker.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if !adopted.Load() {
			t.Fatal("the adopt was not injected")
		}
		if err != nil {
			cur, _ := b.l.Get(ctx, task.TaskID)
			t.Fatalf("Claim after a lost reply with an adopt in between = %v; want the task this claim took (it is %s under %q at version %d, state_shard %q)",
				err, cur.State, cur.LeaseOwner, cur.AssignmentVersion, cur.StateShard)
		}
		if got.State != ledger.StateRunning || got.LeaseOwner != "me" || got.AssignmentVersion != 1 {
			t.Fatalf("claimed task = state %s owner %q version %d", got.State, got.LeaseOwner, got.AssignmentVersion)
		}
	})
}
