package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// runConcurrently runs n requests at once and returns their responses.
func runConcurrently(t *testing.T, b *bundle, n int, req func(i int) events.APIGatewayV2HTTPRequest) []events.APIGatewayV2HTTPResponse {
	t.Helper()
	out := make([]events.APIGatewayV2HTTPResponse, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], _ = b.h.Handle(context.Background(), req(i))
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func TestConcurrentIdenticalSubmits(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		const n = 50
		resps := runConcurrently(t, b, n, func(int) events.APIGatewayV2HTTPRequest {
			return submitReq("same-key", body(prompt))
		})
		want := ledger.TaskID(api.Anonymous, "same-key")
		accepted, replayed := 0, 0
		for i, r := range resps {
			conform(t, submitReq("same-key", body(prompt)), r)
			switch {
			case r.StatusCode == http.StatusAccepted:
				accepted++
			case r.StatusCode == http.StatusOK && r.Headers[api.HeaderIdempotentReplayed] == "true":
				replayed++
			default:
				t.Fatalf("request %d: %d %v %s", i, r.StatusCode, r.Headers, r.Body)
			}
			if id := view(t, r).TaskID; id != want {
				t.Fatalf("request %d saw task %s", i, id)
			}
		}
		if accepted != 1 || replayed != n-1 {
			t.Fatalf("%d accepted, %d replayed; want 1 and %d", accepted, replayed, n-1)
		}
		if tasks := scanTasks(t, e); len(tasks) != 1 || tasks[0].TaskID != want {
			t.Fatalf("table holds %d tasks, want exactly %s", len(tasks), want)
		}
		if counts, _ := drainQueue(t, e); len(counts) != 1 || counts[want] != 1 {
			t.Fatalf("queue %v, want exactly one message for %s", counts, want)
		}
	})
}

func TestConcurrentKeyReuseDifferentPayloads(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		const n = 20
		resps := runConcurrently(t, b, n, func(i int) events.APIGatewayV2HTTPRequest {
			return submitReq("contested", body(fmt.Sprintf("payload %d", i)))
		})
		winner := -1
		for i, r := range resps {
			conform(t, submitReq("contested", body("x")), r)
			switch r.StatusCode {
			case http.StatusAccepted:
				if winner >= 0 {
					t.Fatalf("two 202s: %d and %d", winner, i)
				}
				winner = i
			case http.StatusUnprocessableEntity:
				wantProblem(t, r, 422, api.TypeIdempotencyKeyReused)
			default:
				t.Fatalf("request %d: %d %s", i, r.StatusCode, r.Body)
			}
		}
		if winner < 0 {
			t.Fatal("no request won")
		}
		tasks := scanTasks(t, e)
		wantHash, _ := api.PayloadSHA256("generate", []byte(fmt.Sprintf(`{"prompt":"payload %d"}`, winner)), "")
		if len(tasks) != 1 || tasks[0].PayloadSHA256 != wantHash || tasks[0].Input != fmt.Sprintf(`{"prompt":"payload %d"}`, winner) {
			t.Fatalf("table %+v; want only the winner's payload %d", tasks, winner)
		}
		if counts, _ := drainQueue(t, e); len(counts) != 1 || counts[tasks[0].TaskID] != 1 {
			t.Fatalf("queue %v", counts)
		}
	})
}

// failingSQS wraps the real client and fails every SendMessage.
type failingSQS struct {
	dispatch.SQS
	calls atomic.Int32
}

func (f *failingSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.calls.Add(1)
	return nil, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue", Message: "injected outage"}
}

func TestDispatchFailureStillAccepted(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		var fs *failingSQS
		b := setup(t, e, withSQS(func(s dispatch.SQS) dispatch.SQS { fs = &failingSQS{SQS: s}; return fs }))
		before := time.Now()
		resp := b.do(t, submitReq("outbox", body(prompt)))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		if fs.calls.Load() != 1 {
			t.Fatalf("SendMessage called %d times", fs.calls.Load())
		}
		task, err := b.l.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		// Not indexed: the reconciler finds it through its watch item,
		// due at the task's dispatch deadline.
		if task.State != ledger.StateQueued || task.DueAt <= before.UnixMilli() || task.StateShard != "" {
			t.Fatalf("stored %+v: want queued, unindexed, due in the future", task)
		}
		pk, sk := ledger.WatchKey(b.l.Shard(id), task.DueAt, id)
		w, err := e.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.Names.WatchTable, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk + "#" + task.CreateNonce}}})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := w.Item["task_id"].(*types.AttributeValueMemberS); got == nil || got.Value != id {
			t.Fatalf("watch item %s/%s#%s = %v, want one naming %s", pk, sk, task.CreateNonce, w.Item, id)
		}
		if task.DueAt > before.Add(ledger.DefaultDispatchTimeout+time.Minute).UnixMilli() {
			t.Fatalf("due_at %d too far in the future", task.DueAt)
		}
		logs := b.logs.String()
		if !strings.Contains(logs, "dispatch send failed") || !strings.Contains(logs, id) || strings.Contains(logs, "haiku") {
			t.Fatalf("logs: %s", logs)
		}
		if !strings.Contains(b.metrics.String(), `"DispatchSendFailed":1`) {
			t.Fatalf("metrics: %s", b.metrics.String())
		}
		// A replay does not re-send: the reconciler owns lost sends.
		wantStatus(t, b.do(t, submitReq("outbox", body(prompt))), http.StatusOK)
		if fs.calls.Load() != 1 {
			t.Fatalf("replay re-sent: %d sends", fs.calls.Load())
		}
		if counts, _ := drainQueue(t, e); len(counts) != 0 {
			t.Fatalf("queue %v, want empty", counts)
		}
	})
}

// throttlingDDB wraps the real client and throttles the chosen operations.
type throttlingDDB struct {
	ledger.DynamoDB
	put, get atomic.Bool
}

func throttle() error {
	return &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "injected throttle"}
}

func (d *throttlingDDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if d.put.Load() {
		return nil, throttle()
	}
	return d.DynamoDB.PutItem(ctx, in, o...)
}

func (d *throttlingDDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if d.get.Load() {
		return nil, throttle()
	}
	return d.DynamoDB.GetItem(ctx, in, o...)
}

func TestThrottled(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		var td *throttlingDDB
		b := setup(t, e, withDynamoDB(func(d ledger.DynamoDB) ledger.DynamoDB { td = &throttlingDDB{DynamoDB: d}; return td }))
		td.put.Store(true)
		resp := b.do(t, submitReq("busy", body(prompt)))
		p := wantProblem(t, resp, http.StatusServiceUnavailable, api.TypeThrottled)
		if resp.Headers["Retry-After"] != "1" || p.RetryAfter != 1 {
			t.Fatalf("Retry-After %q / %d", resp.Headers["Retry-After"], p.RetryAfter)
		}
		if n := len(scanTasks(t, e)); n != 0 {
			t.Fatalf("%d items written by a throttled submit", n)
		}
		if counts, _ := drainQueue(t, e); len(counts) != 0 {
			t.Fatalf("queue %v after a throttled submit", counts)
		}
		// The retry with the same key, once DynamoDB recovers, creates it.
		td.put.Store(false)
		resp = b.do(t, submitReq("busy", body(prompt)))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID

		// Reads (GET, cancel, regenerate's parent) throttle the same way.
		td.get.Store(true)
		for _, req := range []events.APIGatewayV2HTTPRequest{getReq(id), cancelReq(id), regenReq(id, "r", "")} {
			r := b.do(t, req)
			wantProblem(t, r, http.StatusServiceUnavailable, api.TypeThrottled)
			if r.Headers["Retry-After"] == "" {
				t.Fatalf("%s: no Retry-After", req.RawPath)
			}
		}
		td.get.Store(false)
		if got, _ := b.l.Get(context.Background(), id); got.State != ledger.StateQueued {
			t.Fatalf("state %s after throttled cancel", got.State)
		}
		if n := len(scanTasks(t, e)); n != 1 {
			t.Fatalf("%d items, want 1", n)
		}
		if !strings.Contains(b.metrics.String(), "RequestThrottled") {
			t.Fatalf("metrics %s", b.metrics.String())
		}
	})
}

// deadlineDDB makes every PutItem time out.
type deadlineDDB struct{ ledger.DynamoDB }

func (deadlineDDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, fmt.Errorf("operation error DynamoDB: PutItem: %w", context.DeadlineExceeded)
}

// failingDDB fails PutItem with an unexpected error.
type failingDDB struct{ ledger.DynamoDB }

func (failingDDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errors.New("injected: access denied")
}

func TestStoreFailures(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withDynamoDB(func(d ledger.DynamoDB) ledger.DynamoDB { return deadlineDDB{d} }))
		resp := b.do(t, submitReq("slow", body("x")))
		wantProblem(t, resp, http.StatusServiceUnavailable, api.TypeUnavailable)
		if resp.Headers["Retry-After"] == "" {
			t.Fatal("no Retry-After on a timeout")
		}
		b = setup(t, e, withDynamoDB(func(d ledger.DynamoDB) ledger.DynamoDB { return failingDDB{d} }))
		wantProblem(t, b.do(t, submitReq("broken", body("x"))), http.StatusInternalServerError, api.TypeInternal)
		if !strings.Contains(b.logs.String(), "task store error") {
			t.Fatalf("unexpected error not logged: %s", b.logs.String())
		}
		if n := len(scanTasks(t, e)); n != 0 {
			t.Fatalf("%d items", n)
		}
	})
}
