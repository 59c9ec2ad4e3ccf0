package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// onClock makes the ledger and the handler read clock (the budgets already
// do, withSpend), so tasks end and expire on the same clock as budgets.
func onClock(t *testing.T, b *bundle, clock *testenv.Clock) {
	t.Helper()
	l, err := ledger.New(b.env.DDB, ledger.Config{TasksTable: b.env.Names.TasksTable, ReviewTable: b.env.Names.ReviewTable, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b.l, b.h.Ledger, b.h.Now = l, l, clock.Now
}

// budgetItem returns the chain's budget item, after doing to it what
// DynamoDB's TTL sweeper may: delete it once its expires_at is before now.
func budgetItem(t *testing.T, e *testenv.Env, budgetKey string, now time.Time) map[string]ddbtypes.AttributeValue {
	t.Helper()
	k := map[string]ddbtypes.AttributeValue{"task_id": &ddbtypes.AttributeValueMemberS{Value: spend.BudgetItemKey(budgetKey)}}
	out, err := e.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.Names.TasksTable, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := out.Item["expires_at"].(*ddbtypes.AttributeValueMemberN); ok {
		if at, _ := strconv.ParseInt(n.Value, 10, 64); at < now.Unix() {
			if _, err := e.DDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &e.Names.TasksTable, Key: k}); err != nil {
				t.Fatal(err)
			}
			return nil
		}
	}
	return out.Item
}

// TestRegenerateKeepsTheChainBudget: a chain whose tasks stop calling the
// provider (each cancelled while queued, and regenerated before the
// ledger forgets it) writes nothing to its budget item, yet lives on for
// as long as it gains tasks; every regenerate extends the item, so the
// task that finally calls, 54 days after the chain last spent, still
// finds the chain's spend. A regenerate of an unbudgeted task makes no
// spend write.
func TestRegenerateKeepsTheChainBudget(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e, withSpend(e, clock, nil))
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("ttl-root", budgetBody("p", `{"max_total_tokens":10000}`))))
		chain := spend.ChainKeyOf(stored(t, b, root.TaskID))
		r := spend.Reservation{ID: root.TaskID + ".a1", Tokens: 9_000}
		if _, err := b.h.Budgets.Reserve(ctx, chain, spend.Budget{MaxTokens: 10_000}, r); err != nil {
			t.Fatal(err)
		}
		if _, err := b.h.Budgets.Settle(ctx, chain, r, spend.Usage{InputTokens: 9_000}); err != nil {
			t.Fatal(err)
		}
		last := root.TaskID
		for i := range 9 {
			wantStatus(t, b.do(t, cancelReq(last)), http.StatusOK)
			clock.Advance(6 * 24 * time.Hour) // within the cancelled task's 7-day retention
			if budgetItem(t, e, chain, clock.Now()) == nil {
				t.Fatalf("day %d: the chain's budget item expired while its last task can still be regenerated", 6*(i+1))
			}
			e.Counter.Reset()
			child := view(t, b.do(t, regenReq(last, fmt.Sprintf("ttl-regen-%d", i), "")))
			if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 1 {
				t.Fatalf("a budgeted regenerate made %v; want one UpdateItem (the chain's budget extended)", c)
			}
			n, _ := budgetItem(t, e, chain, clock.Now())["expires_at"].(*ddbtypes.AttributeValueMemberN)
			if want := strconv.FormatInt(clock.Now().Add(spend.DefaultRetention).Unix(), 10); n == nil || n.Value != want {
				t.Fatalf("after the regenerate the chain's budget expires at %v, want %s", n, want)
			}
			last = child.TaskID
		}
		got, err := b.l.Get(ctx, last)
		if err != nil || got.Chain() != root.TaskID {
			t.Fatalf("last task %+v (%v): not of the root's chain", got, err)
		}
		var be *spend.BudgetExhaustedError
		if _, err := b.h.Budgets.Reserve(ctx, spend.ChainKeyOf(got), spend.Budget{MaxTokens: got.BudgetMaxTokens}, spend.Reservation{ID: last + ".a1", Tokens: 5_000}); !errors.As(err, &be) || be.State.Spent.Tokens() != 9_000 {
			t.Fatalf("the last task's reserve, 54 days on: %v; want exhausted with the chain's 9000 spent", err)
		}

		plain := view(t, b.do(t, submitReq("ttl-plain", body("p"))))
		e.Counter.Reset()
		wantStatus(t, b.do(t, regenReq(plain.TaskID, "ttl-plain-regen", "")), http.StatusAccepted)
		if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 0 {
			t.Fatalf("an unbudgeted regenerate made %v; want no UpdateItem", c)
		}
	})
}

// TestRegenerateOfAnExpiredTaskIsNotFound: a task past its retention
// window (expires_at passed, the TTL sweeper not there yet) cannot be
// regenerated — it is gone, as for Create — so no regenerate can join a
// chain whose budget item was kept only for that window. Nothing is
// written.
func TestRegenerateOfAnExpiredTaskIsNotFound(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e, withSpend(e, clock, nil))
		onClock(t, b, clock)
		root := view(t, b.do(t, submitReq("ttl-expired", budgetBody("p", `{"max_total_tokens":10000}`))))
		wantStatus(t, b.do(t, cancelReq(root.TaskID)), http.StatusOK)
		clock.Advance(ledger.DefaultRetention - time.Minute)
		wantStatus(t, b.do(t, regenReq(root.TaskID, "ttl-expired-1", "")), http.StatusAccepted)
		clock.Advance(2 * time.Minute)
		e.Counter.Reset()
		wantProblem(t, b.do(t, regenReq(root.TaskID, "ttl-expired-2", "")), http.StatusNotFound, api.TypeNotFound)
		if c := e.Counter.Calls(); c["DynamoDB.PutItem"] != 0 || c["DynamoDB.UpdateItem"] != 0 || c["SQS.SendMessage"] != 0 {
			t.Fatalf("a refused regenerate made %v; want nothing written", c)
		}
	})
}

// TestMaxApprovalIsTheLedgers: the API's longest approval wait is the
// ledger's MaxApprovalTTL, the bound spend.DefaultRetention is derived
// from (a longer one here would let a chain's budget item expire while a
// task of the chain still waits for approval).
func TestMaxApprovalIsTheLedgers(t *testing.T) {
	if got := time.Duration(api.MaxApprovalSeconds) * time.Second; got != ledger.MaxApprovalTTL {
		t.Fatalf("api.MaxApprovalSeconds is %s, ledger.MaxApprovalTTL %s", got, ledger.MaxApprovalTTL)
	}
	if spend.DefaultRetention < time.Duration(api.MaxApprovalSeconds)*time.Second+ledger.DefaultRetention {
		t.Fatalf("spend.DefaultRetention %s is shorter than the longest approval wait + the tasks' retention", spend.DefaultRetention)
	}
}

// TestRegenerateWhenTheChainBudgetCannotBeExtended: every UpdateItem of
// the budgets fails to send, so the chain's budget item cannot be
// extended: the regenerate is a 503 with Retry-After, and no task is
// written or sent. A retry with the same key once the store answers is
// accepted.
func TestRegenerateWhenTheChainBudgetCannotBeExtended(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		down := true
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if down && c.Service == "DynamoDB" && c.Operation == "UpdateItem" {
				return faultinject.SendFailure
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(append(cfg.APIOptions[:0:0], e.AWS.APIOptions...), inj.Register)
		acct, err := spend.NewAccountant(spend.AccountantConfig{DB: awsclient.DynamoDB(cfg), TasksTable: e.Names.TasksTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		b := setup(t, e, withHandler(func(h *api.Handler) { h.Budgets = acct }))
		ctx := context.Background()
		root := view(t, b.do(t, submitReq("ttl-down", budgetBody("p", `{"max_total_tokens":10000}`))))
		// The chain has spent, so it has a budget item to extend.
		direct, err := spend.NewAccountant(spend.AccountantConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		r := spend.Reservation{ID: root.TaskID + ".a1", Tokens: 100}
		if _, err := direct.Reserve(ctx, spend.ChainKeyOf(stored(t, b, root.TaskID)), spend.Budget{MaxTokens: 10_000}, r); err != nil {
			t.Fatal(err)
		}
		e.Counter.Reset()
		resp := b.do(t, regenReq(root.TaskID, "ttl-down-regen", ""))
		wantProblem(t, resp, http.StatusServiceUnavailable, api.TypeUnavailable)
		if resp.Headers["Retry-After"] == "" {
			t.Fatalf("503 without Retry-After: %v", resp.Headers)
		}
		if c := e.Counter.Calls(); c["DynamoDB.PutItem"] != 0 || c["SQS.SendMessage"] != 0 {
			t.Fatalf("a regenerate refused for its budget made %v; want no task written or sent", c)
		}
		if inj.Total(faultinject.SendFailure) == 0 {
			t.Fatal("no failure injected: the test proves nothing")
		}
		down = false
		wantStatus(t, b.do(t, regenReq(root.TaskID, "ttl-down-regen", "")), http.StatusAccepted)
	})
}

// TestRegenerateOfALongParkedParentWhoseChainRecordIsGone: a parent that is not terminal (queued
// here; parked needs_review in production) carries no expires_at and can
// be regenerated any time, while its chain's budget record is kept only
// spend.DefaultRetention after the last reservation. Once the record is
// gone and the parent is older than that, what the chain spent is not
// known: the regenerate is a 409 budget-record-expired, nothing recorded —
// not a child that starts the chain's budget from nothing spent. Inside
// the retention a chain that never reserved has no record, and the
// regenerate is accepted.
func TestRegenerateOfALongParkedParentWhoseChainRecordIsGone(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		b := setup(t, e, withSpend(e, clock, nil))
		onClock(t, b, clock)

		fresh := view(t, b.do(t, submitReq("gone-fresh", budgetBody("p", `{"max_total_tokens":10000}`))))
		clock.Advance(24 * time.Hour) // no record: never reserved on
		wantStatus(t, b.do(t, regenReq(fresh.TaskID, "gone-fresh-regen", "")), http.StatusAccepted)

		root := view(t, b.do(t, submitReq("gone-root", budgetBody("p", `{"max_total_tokens":10000}`))))
		chain := spend.ChainKeyOf(stored(t, b, root.TaskID))
		if _, err := b.h.Budgets.Reserve(ctx, chain, spend.Budget{MaxTokens: 10_000}, spend.Reservation{ID: root.TaskID + ".a1", Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(spend.DefaultRetention + time.Hour)
		if budgetItem(t, e, chain, clock.Now()) != nil {
			t.Fatal("setup: the chain's record outlived its retention")
		}
		e.Counter.Reset()
		wantProblem(t, b.do(t, regenReq(root.TaskID, "gone-regen", "")), http.StatusConflict, api.TypeBudgetRecordExpired)
		if calls := e.Counter.Calls(); calls["DynamoDB.PutItem"] != 0 {
			t.Fatalf("the refused regenerate wrote: %v", calls)
		}
		if _, err := b.l.Get(ctx, b.l.TaskID("anonymous", "gone-regen")); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("the refused regenerate's task: %v, want none recorded", err)
		}
	})
}
