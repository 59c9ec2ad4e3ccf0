package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ReconRow is one reconciler run over a table with Completed finished
// tasks and Live queued ones.
type ReconRow struct {
	Completed, Live int
	// Calls are the run's AWS calls by operation.
	Calls map[string]int
	// ReadCalls are its DynamoDB read calls (Query, GetItem, Scan, BatchGetItem).
	ReadCalls int
	// ItemsRead are the items those reads evaluated (Query/Scan
	// ScannedCount, one per GetItem hit).
	ItemsRead int
	Examined  int
	Elapsed   time.Duration
}

// itemsRead is SDK middleware adding up the items DynamoDB reads evaluated.
type itemsRead struct {
	mu sync.Mutex
	n  int
}

func (r *itemsRead) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benchItemsRead",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			n := 0
			switch o := out.Result.(type) {
			case *dynamodb.QueryOutput:
				n = int(o.ScannedCount)
			case *dynamodb.ScanOutput:
				n = int(o.ScannedCount)
			case *dynamodb.GetItemOutput:
				if len(o.Item) > 0 {
					n = 1
				}
			case *dynamodb.BatchGetItemOutput:
				for _, items := range o.Responses {
					n += len(items)
				}
			}
			r.mu.Lock()
			r.n += n
			r.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

// reconcilerRun fills a fresh table with history completed tasks (batch
// writes of the items Complete leaves: no by_state attributes) and Live
// queued tasks not yet due, then counts one reconciler run's reads.
func reconcilerRun(ctx context.Context, b *soak.Backend, cfg Config, history int) (ReconRow, error) {
	env, drop, err := b.NewEnv(ctx, "benchrec")
	if err != nil {
		return ReconRow{}, err
	}
	defer drop()
	clean := awsclient.DynamoDB(b.AWS)
	lcfg := ledger.Config{TasksTable: env.Names.TasksTable, ReviewTable: env.Names.ReviewTable}
	if err := writeCompleted(ctx, clean, env.Names.TasksTable, history); err != nil {
		return ReconRow{}, err
	}
	seed, err := ledger.New(clean, lcfg)
	if err != nil {
		return ReconRow{}, err
	}
	for i := range cfg.Live {
		if _, err := seed.Create(ctx, ledger.NewTask{Scope: "bench", IdempotencyKey: "live-" + strconv.Itoa(i),
			Kind: "generate", Input: `{"prompt":"live"}`, PayloadSHA256: "live-" + strconv.Itoa(i)}); err != nil {
			return ReconRow{}, err
		}
	}

	counter, items := awsclient.NewCounter(), &itemsRead{}
	cc := b.AWS.Copy()
	cc.APIOptions = append(append([]func(*middleware.Stack) error{}, b.AWS.APIOptions...), counter.Register, items.register)
	led, err := ledger.New(awsclient.DynamoDB(cc), lcfg)
	if err != nil {
		return ReconRow{}, err
	}
	sq := awsclient.SQS(cc)
	h := &reconciler.Handler{
		Ledger: led, Dispatch: &dispatch.Sender{SQS: sq, QueueURL: env.Names.TaskQueueURL},
		DLQ: sq, DLQURL: env.Names.DeadLetterQueueURL, Provider: simulated.New(simulated.Options{}),
	}
	start := time.Now()
	sum, err := h.Handle(ctx, []byte(`{}`))
	if err != nil {
		return ReconRow{}, fmt.Errorf("bench: reconciler run: %w", err)
	}
	row := ReconRow{Completed: history, Live: cfg.Live, Calls: counter.Calls(), ItemsRead: items.n, Examined: sum.Examined, Elapsed: time.Since(start)}
	for op, n := range row.Calls {
		switch op {
		case "DynamoDB.Query", "DynamoDB.GetItem", "DynamoDB.Scan", "DynamoDB.BatchGetItem":
			row.ReadCalls += n
		}
	}
	return row, nil
}

// writeCompleted batch-writes n completed tasks shaped as Complete leaves
// them (no state_shard, no due_at, a TTL).
func writeCompleted(ctx context.Context, ddb *dynamodb.Client, table string, n int) error {
	now := time.Now().UTC()
	batches := (n + 24) / 25
	return parallel(batches, 4, func(bi int) error {
		var reqs []types.WriteRequest
		for i := bi * 25; i < min(n, (bi+1)*25); i++ {
			id := ledger.TaskID("history", strconv.Itoa(i))
			t := ledger.Task{
				TaskID: id, State: ledger.StateCompleted, Scope: "history", IdempotencyKey: strconv.Itoa(i),
				PayloadSHA256: "h" + strconv.Itoa(i), Input: `{"prompt":"old"}`, Kind: "generate",
				Attempts: 1, MaxAttempts: 5, AssignmentVersion: 1,
				CreatedAt: now.Format(time.RFC3339Nano), CreatedMs: now.UnixMilli(),
				UpdatedAt: now.Format(time.RFC3339Nano), UpdatedMs: now.UnixMilli(),
				BudgetStartMs: now.UnixMilli(), MaxAgeMs: time.Hour.Milliseconds(), DeadlineMs: now.Add(time.Hour).UnixMilli(),
				Result: `{"text":"done"}`, Provider: "simulated", ProviderRef: "old-" + strconv.Itoa(i),
				CompletedAt: now.Format(time.RFC3339Nano), ExpiresAt: now.Add(7 * 24 * time.Hour).Unix(),
			}
			item, err := attributevalue.MarshalMap(t)
			if err != nil {
				return err
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		for len(reqs) > 0 {
			out, err := ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil {
				return fmt.Errorf("bench: write history: %w", err)
			}
			reqs = out.UnprocessedItems[table]
		}
		return nil
	})
}
