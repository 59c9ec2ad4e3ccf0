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
	// RRU are the read units those reads bill, from item sizes (meter).
	RRU      float64
	Examined int
	// Watched are the watch items the run read (none: every one came due
	// before the run before it); Pending those not read yet (the live
	// tasks', not due).
	Watched, Pending int
	Elapsed          time.Duration
	// Due is the run before (runs, if one ran out of time), the one the
	// completed tasks' watch items came due in: it reads each once.
	Due ReconRun
}

// ReconRun is what reconciler runs read.
type ReconRun struct {
	Runs, Watched, ReadCalls, ItemsRead int
	RRU                                 float64
}

// maxDueRuns bounds the runs that read the history's watch items.
const maxDueRuns = 20

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
// writes of the items Complete leaves: no by_state attributes) submitted
// two hours ago, each with its watch item (pkg/ledger/watch.go) due an
// hour and a half ago, lets a reconciler run read them as it did when
// they came due (row Due: each watch item once, reads following the
// submissions of that period), submits Live queued tasks not yet due, and
// then counts the next run's reads: with the cursors past the history,
// they do not grow with it.
func reconcilerRun(ctx context.Context, b *soak.Backend, cfg Config, history int) (ReconRow, error) {
	env, drop, err := b.NewEnv(ctx, "benchrec")
	if err != nil {
		return ReconRow{}, err
	}
	defer drop()
	clean := awsclient.DynamoDB(b.AWS)
	lcfg := ledger.Config{TasksTable: env.Names.TasksTable, ReviewTable: env.Names.ReviewTable, WatchTable: env.Names.WatchTable}
	seed, err := ledger.New(clean, lcfg)
	if err != nil {
		return ReconRow{}, err
	}
	if err := writeCompleted(ctx, clean, seed, history, time.Now().Add(-2*time.Hour)); err != nil {
		return ReconRow{}, err
	}
	run := func() (reconciler.Summary, map[string]int, int, usage, time.Duration, error) {
		counter, items, m := awsclient.NewCounter(), &itemsRead{}, newMeter(clean)
		cc := b.AWS.Copy()
		cc.APIOptions = append(append([]func(*middleware.Stack) error{}, b.AWS.APIOptions...), counter.Register, items.register, m.register)
		led, err := ledger.New(awsclient.DynamoDB(cc), lcfg)
		if err != nil {
			return reconciler.Summary{}, nil, 0, usage{}, 0, err
		}
		sq := awsclient.SQS(cc)
		h := &reconciler.Handler{
			Ledger: led, Dispatch: &dispatch.Sender{SQS: sq, QueueURL: env.Names.TaskQueueURL},
			DLQ: sq, DLQURL: env.Names.DeadLetterQueueURL, Provider: simulated.New(simulated.Options{}),
		}
		start := time.Now()
		sum, err := h.Handle(ctx, []byte(`{}`))
		if err != nil {
			return sum, nil, 0, usage{}, 0, fmt.Errorf("bench: reconciler run: %w", err)
		}
		if err := m.err(); err != nil {
			return sum, nil, 0, usage{}, 0, err
		}
		return sum, counter.Calls(), items.n, m.usage(), time.Since(start), nil
	}
	readCalls := func(calls map[string]int) int {
		n := 0
		for op, c := range calls {
			switch op {
			case "DynamoDB.Query", "DynamoDB.GetItem", "DynamoDB.Scan", "DynamoDB.BatchGetItem":
				n += c
			}
		}
		return n
	}
	// A run stops at its time budget (partial) and the next goes on from
	// the cursors: the Due figures are those runs' sum.
	var due ReconRun
	for due.Watched < history {
		if due.Runs == maxDueRuns {
			return ReconRow{}, fmt.Errorf("bench: %d runs after the history came due read %d of its %d watch items", due.Runs, due.Watched, history)
		}
		sum, calls, items, u, _, err := run()
		if err != nil {
			return ReconRow{}, err
		}
		due.Runs++
		due.Watched += sum.Watched
		due.ReadCalls += readCalls(calls)
		due.ItemsRead += items
		due.RRU += u.RRU
	}
	if due.Watched != history {
		return ReconRow{}, fmt.Errorf("bench: the runs after the history came due read %d watch items, want each of the %d once", due.Watched, history)
	}
	for i := range cfg.Live {
		if _, err := seed.Create(ctx, ledger.NewTask{Scope: "bench", IdempotencyKey: "live-" + strconv.Itoa(i),
			Kind: "generate", Input: `{"prompt":"live"}`, PayloadSHA256: "live-" + strconv.Itoa(i)}); err != nil {
			return ReconRow{}, err
		}
	}
	sum, calls, items, u, elapsed, err := run()
	if err != nil {
		return ReconRow{}, err
	}
	return ReconRow{Completed: history, Live: cfg.Live, Calls: calls, ReadCalls: readCalls(calls), ItemsRead: items, RRU: u.RRU,
		Examined: sum.Examined, Watched: sum.Watched, Pending: sum.WatchPending, Elapsed: elapsed, Due: due}, nil
}

// writeCompleted batch-writes n completed tasks shaped as Complete leaves
// them (no state_shard, no due_at, a TTL), created at created, and the
// watch item each one's submit put (due at created + the dispatch timeout).
func writeCompleted(ctx context.Context, ddb *dynamodb.Client, l *ledger.Ledger, n int, created time.Time) error {
	cfg := l.Config()
	timeout := cfg.DispatchTimeout
	if timeout <= 0 {
		timeout = ledger.DefaultDispatchTimeout
	}
	now := time.Now().UTC()
	created = created.UTC()
	due := created.Add(timeout)
	batches := (n + 24) / 25
	return parallel(batches, 4, func(bi int) error {
		var reqs, watch []types.WriteRequest
		for i := bi * 25; i < min(n, (bi+1)*25); i++ {
			id := ledger.TaskID("history", strconv.Itoa(i))
			t := ledger.Task{
				TaskID: id, State: ledger.StateCompleted, Scope: "history", IdempotencyKey: strconv.Itoa(i),
				PayloadSHA256: "h" + strconv.Itoa(i), Input: `{"prompt":"old"}`, Kind: "generate",
				Attempts: 1, MaxAttempts: 5, AssignmentVersion: 1,
				CreatedAt: created.Format(time.RFC3339Nano), CreatedMs: created.UnixMilli(),
				UpdatedAt: created.Format(time.RFC3339Nano), UpdatedMs: created.UnixMilli(),
				BudgetStartMs: created.UnixMilli(), MaxAgeMs: time.Hour.Milliseconds(), DeadlineMs: created.Add(time.Hour).UnixMilli(),
				Result: `{"text":"done"}`, Provider: "simulated", ProviderRef: "old-" + strconv.Itoa(i),
				CompletedAt: created.Format(time.RFC3339Nano), ExpiresAt: now.Add(7 * 24 * time.Hour).Unix(),
			}
			item, err := attributevalue.MarshalMap(t)
			if err != nil {
				return err
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			pk, sk := ledger.WatchKey(l.Shard(id), due.UnixMilli(), id)
			watch = append(watch, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk},
				"task_id":    &types.AttributeValueMemberS{Value: id},
				"expires_at": &types.AttributeValueMemberN{Value: strconv.FormatInt(due.Add(ledger.WatchRetention).Unix(), 10)},
			}}})
		}
		for table, reqs := range map[string][]types.WriteRequest{cfg.TasksTable: reqs, cfg.WatchTable: watch} {
			for len(reqs) > 0 {
				out, err := ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
				if err != nil {
					return fmt.Errorf("bench: write history: %w", err)
				}
				reqs = out.UnprocessedItems[table]
			}
		}
		return nil
	})
}
