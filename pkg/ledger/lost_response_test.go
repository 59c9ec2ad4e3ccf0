package ledger_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// loseFirstPutResponse lets the first PutItem reach the engine and write,
// then replaces its response with a retryable 500, as a dropped connection
// after the write would look. The SDK's retryer sends the PutItem again.
func loseFirstPutResponse(lost *atomic.Int32) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("loseResponse",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleDeserialize(ctx, in)
				if err == nil && awsmiddleware.GetOperationName(ctx) == "PutItem" && lost.CompareAndSwap(0, 1) {
					resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 500, Header: http.Header{}}}
					return out, md, &smithyhttp.ResponseError{Response: resp, Err: errors.New("connection reset after the write")}
				}
				return out, md, err
			}), middleware.After)
	}
}

func TestCreateRecognisesItsOwnWriteAfterALostResponse(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		var lost atomic.Int32
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, loseFirstPutResponse(&lost))
		db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
		l, err := ledger.New(db, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable})
		if err != nil {
			t.Fatal(err)
		}
		task, err := l.Create(context.Background(), newTask("lost-1", "p"))
		if lost.Load() != 1 {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("Create after a lost response = %v; want the task it wrote, as created", err)
		}
		// A genuine replay by another call is still a duplicate.
		if _, err := l.Create(context.Background(), newTask("lost-1", "p")); !errors.As(err, new(*ledger.DuplicateError)) {
			t.Fatalf("second Create = %v, want DuplicateError", err)
		}
		if task.State != ledger.StateQueued {
			t.Fatalf("task = %+v", task)
		}
	})
}
