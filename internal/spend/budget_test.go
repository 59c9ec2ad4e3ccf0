package spend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// t0 is where the tests' clocks start: ahead of the real time, so kumo
// (which deletes items whose expires_at is before the real time) keeps the
// budget items the tests write, 40 days on from t0 and moved on from there.
var t0 = testenv.NextUTCDay(time.Now()).Add(22 * time.Hour)

type bundle struct {
	env   *testenv.Env
	clock *testenv.Clock
	acct  *spend.Accountant
	inj   *faultinject.Injector
	db    *dynamodb.Client // through the injector
}

func setup(t *testing.T, e *testenv.Env, s faultinject.Schedule) *bundle {
	t.Helper()
	b := &bundle{env: e, clock: testenv.NewClock(t0), inj: faultinject.New(s)}
	cfg := e.AWS.Copy()
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), b.inj.Register)
	b.db = awsclient.DynamoDB(cfg)
	acct, err := spend.NewAccountant(spend.AccountantConfig{DB: b.db, TasksTable: e.Names.TasksTable, Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b.acct = acct
	return b
}

func (b *bundle) item(t *testing.T, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.env.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &b.env.Names.TasksTable, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: key}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func TestConcurrentReservesNeverOverspend(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, nil)
		budget := spend.Budget{MaxTokens: 10_000, MaxCost: 1_000_000}
		// 30 attempts each wanting 1,500 tokens / $0.10: the token limit
		// admits 6 (9,000), the cost limit would admit 10.
		var mu sync.Mutex
		var wg sync.WaitGroup
		ok, exhausted := 0, 0
		for i := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.acct.Reserve(context.Background(), "t_chainroot", budget, spend.Reservation{ID: fmt.Sprintf("t_x.%d", i), Tokens: 1500, Cost: 100_000})
				mu.Lock()
				defer mu.Unlock()
				var be *spend.BudgetExhaustedError
				switch {
				case err == nil:
					ok++
				case errors.As(err, &be):
					exhausted++
				default:
					t.Errorf("reserve: %v", err)
				}
			}()
		}
		wg.Wait()
		if ok != 6 || exhausted != 24 {
			t.Fatalf("reserved %d, exhausted %d; want 6 and 24", ok, exhausted)
		}
		s, err := b.acct.Get(context.Background(), "t_chainroot")
		if err != nil {
			t.Fatal(err)
		}
		if s.ReservedTokens != 9000 || s.ReservedCost != 600_000 || s.Spent.Tokens() != 0 {
			t.Fatalf("state %+v, want 9000 tokens / 600000 micros reserved", s)
		}
		// Six reservations in flight: still 1 write unit per Reserve/Settle.
		if n := sizeUpperBound(b.item(t, "spend#t_chainroot")); n >= 1024 {
			t.Fatalf("budget item is up to %d bytes: more than 1 write unit per write", n)
		}
	})
}

func TestSettleAndExhaustion(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil)
		budget := spend.Budget{MaxTokens: 5000, MaxCost: 20_000}
		r1 := spend.Reservation{ID: "t_a.1", Tokens: 3000, Cost: 12_000}
		s, err := b.acct.Reserve(ctx, "t_a", budget, r1)
		if err != nil || s.ReservedTokens != 3000 {
			t.Fatalf("reserve: %+v, %v", s, err)
		}
		// Reserving the same attempt again reserves nothing more.
		if s, err := b.acct.Reserve(ctx, "t_a", budget, r1); err != nil || s.ReservedTokens != 3000 {
			t.Fatalf("re-reserve: %+v, %v; want the same 3000 reserved", s, err)
		}
		// A second attempt does not fit while the first is in flight.
		r2 := spend.Reservation{ID: "t_a.2", Tokens: 3000, Cost: 12_000}
		var be *spend.BudgetExhaustedError
		if _, err := b.acct.Reserve(ctx, "t_a", budget, r2); !errors.As(err, &be) {
			t.Fatalf("second reserve: %v, want exhausted", err)
		}
		if rt, rc := be.State.Remaining(budget); be.State.ReservedTokens != 3000 || rt != 2000 || rc != 8000 || be.Wanted != r2 {
			t.Fatalf("exhausted error %+v: remaining %d / %d", be, rt, rc)
		}
		// The first settles at what it really used; now the second fits.
		actual := spend.Usage{InputTokens: 800, OutputTokens: 400, Cost: 4_000}
		s, err = b.acct.Settle(ctx, "t_a", r1, actual)
		if err != nil || s.Spent != actual || s.ReservedTokens != 0 || s.ReservedCost != 0 {
			t.Fatalf("settle: %+v, %v", s, err)
		}
		// Settling again changes nothing.
		if s, err := b.acct.Settle(ctx, "t_a", r1, actual); err != nil || s.Spent != actual {
			t.Fatalf("re-settle: %+v, %v; want spend counted once", s, err)
		}
		if _, err := b.acct.Reserve(ctx, "t_a", budget, r2); err != nil {
			t.Fatalf("second reserve after settle: %v", err)
		}
		// Settling with other amounts than reserved is a caller bug.
		if _, err := b.acct.Settle(ctx, "t_a", spend.Reservation{ID: "t_a.2", Tokens: 1}, actual); err == nil || !strings.Contains(err.Error(), "reserved as") {
			t.Fatalf("mismatched settle: %v", err)
		}
		// Over-reporting provider: real spend is recorded beyond the budget,
		// and then nothing more is reserved.
		s, err = b.acct.Settle(ctx, "t_a", r2, spend.Usage{InputTokens: 1000, OutputTokens: 3000, Cost: 17_000})
		if err != nil || s.Spent.Tokens() != 5200 || s.Spent.Cost != 21_000 {
			t.Fatalf("over settle: %+v, %v", s, err)
		}
		_, err = b.acct.Reserve(ctx, "t_a", budget, spend.Reservation{ID: "t_a.3", Tokens: 1, Cost: 1})
		if !errors.As(err, &be) || be.State.Spent.Cost != 21_000 {
			t.Fatalf("reserve past the budget: %v", err)
		}
		if rt, rc := be.State.Remaining(budget); rt != 0 || rc != 0 {
			t.Fatalf("remaining %d, %d; want 0, 0", rt, rc)
		}
		if msg := be.Error(); !strings.Contains(msg, "spent 5200 tokens / $0.021000") || !strings.Contains(msg, "remaining 0 tokens") {
			t.Fatalf("error text %q", msg)
		}
		it := b.item(t, "spend#t_a")
		if _, ok := it["expires_at"]; !ok {
			t.Fatal("budget item without expires_at")
		}
		for _, a := range []string{"state_shard", "due_at", "state"} {
			if _, ok := it[a]; ok {
				t.Fatalf("budget item carries %s", a)
			}
		}
	})
}

func TestReservationLargerThanBudgetWritesNothing(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, nil)
		var be *spend.BudgetExhaustedError
		_, err := b.acct.Reserve(context.Background(), "t_big", spend.Budget{MaxCost: 100}, spend.Reservation{ID: "t_big.1", Tokens: 1, Cost: 101})
		if !errors.As(err, &be) {
			t.Fatalf("got %v, want exhausted", err)
		}
		if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 0 {
			t.Fatalf("calls %v: a reservation that can never fit must write nothing", c)
		}
		if it := b.item(t, "spend#t_big"); len(it) != 0 {
			t.Fatalf("item written: %v", it)
		}
		// An unlimited dimension is not checked.
		if _, err := b.acct.Reserve(context.Background(), "t_big", spend.Budget{MaxCost: 100}, spend.Reservation{ID: "t_big.2", Tokens: 1 << 40, Cost: 100}); err != nil {
			t.Fatalf("unlimited tokens: %v", err)
		}
	})
}

func TestLostRepliesReserveAndSettleOnce(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		plan := faultinject.NewPlan()
		plan.Add("spend#t_l", faultinject.Step{Service: "DynamoDB", Operation: "UpdateItem", N: 1, Kind: faultinject.LostReply})
		plan.Add("spend#t_l", faultinject.Step{Service: "DynamoDB", Operation: "UpdateItem", N: 3, Kind: faultinject.LostReply})
		b := setup(t, e, plan)
		budget := spend.Budget{MaxTokens: 1000}
		r := spend.Reservation{ID: "t_l.1", Tokens: 600, Cost: 50}
		s, err := b.acct.Reserve(ctx, "t_l", budget, r)
		if err != nil || s.ReservedTokens != 600 {
			t.Fatalf("reserve after a lost reply: %+v, %v; want 600 reserved once", s, err)
		}
		s, err = b.acct.Settle(ctx, "t_l", r, spend.Usage{InputTokens: 100, OutputTokens: 200, Cost: 30})
		if err != nil || s.Spent.Tokens() != 300 || s.ReservedTokens != 0 || s.Spent.Cost != 30 {
			t.Fatalf("settle after a lost reply: %+v, %v; want 300 spent once, nothing reserved", s, err)
		}
		if n := b.inj.Total(faultinject.LostReply); n != 2 {
			t.Fatalf("%d lost replies injected, want 2", n)
		}
		got, _ := b.acct.Get(ctx, "t_l")
		if got.Spent.Tokens() != 300 || got.ReservedTokens != 0 {
			t.Fatalf("stored %+v", got)
		}
	})
}

// sizeUpperBound over-estimates an item's DynamoDB size: attribute names
// plus the text of S and N values.
func sizeUpperBound(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value) + 1
		default:
			n += 1024
		}
	}
	return n
}

// TestConcurrentReservesWithLostRepliesCountOnce: lost replies during
// concurrent reserves neither overspend nor double-reserve.
func TestConcurrentReservesWithLostRepliesCountOnce(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		rates := faultinject.Rates{Seed: 14, Rules: []faultinject.Rule{{Service: "DynamoDB", Operation: "UpdateItem", Kind: faultinject.LostReply, Rate: 0.5}}}
		b := setup(t, e, rates)
		budget := spend.Budget{MaxTokens: 1000}
		var mu sync.Mutex
		var wg sync.WaitGroup
		ok, exhausted := 0, 0
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.acct.Reserve(context.Background(), "t_lr", budget, spend.Reservation{ID: fmt.Sprintf("t_lr.%d", i), Tokens: 100})
				mu.Lock()
				defer mu.Unlock()
				var be *spend.BudgetExhaustedError
				switch {
				case err == nil:
					ok++
				case errors.As(err, &be):
					exhausted++
				default:
					t.Errorf("reserve: %v", err)
				}
			}()
		}
		wg.Wait()
		if b.inj.Total(faultinject.LostReply) == 0 {
			t.Fatal("no lost reply injected: the test proves nothing")
		}
		s, err := b.acct.Get(context.Background(), "t_lr")
		if err != nil {
			t.Fatal(err)
		}
		if ok != 10 || exhausted != 10 || s.ReservedTokens != 1000 {
			t.Fatalf("reserved %d, exhausted %d, stored %d tokens; want 10, 10, 1000 (each counted once)", ok, exhausted, s.ReservedTokens)
		}
	})
}

// TestSettleIfReserved settles a reservation still held, and leaves alone
// (without a read) one already settled or never made.
func TestSettleIfReserved(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, nil)
		ctx := context.Background()
		r := spend.Reservation{ID: "t_s.a1", Tokens: 100, Cost: 10}
		if _, err := b.acct.Reserve(ctx, "t_s", spend.Budget{MaxTokens: 1000}, r); err != nil {
			t.Fatal(err)
		}
		e.Counter.Reset()
		ok, err := b.acct.SettleIfReserved(ctx, "t_s", r, spend.Usage{InputTokens: 60, OutputTokens: 40, Cost: 10})
		if err != nil || !ok {
			t.Fatalf("SettleIfReserved of a held reservation = %v, %v; want settled", ok, err)
		}
		ok, err = b.acct.SettleIfReserved(ctx, "t_s", r, spend.Usage{InputTokens: 60, OutputTokens: 40, Cost: 10})
		if err != nil || ok {
			t.Fatalf("again = %v, %v; want not settled, no error", ok, err)
		}
		if ok, err = b.acct.SettleIfReserved(ctx, "t_s", spend.Reservation{ID: "t_s.a9", Tokens: 1}, spend.Usage{}); err != nil || ok {
			t.Fatalf("a reservation never made = %v, %v; want not settled, no error", ok, err)
		}
		if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 3 || c["DynamoDB.GetItem"] != 0 {
			t.Fatalf("calls %v, want 3 UpdateItems and no read", c)
		}
		s, err := b.acct.Get(ctx, "t_s")
		if err != nil || s.ReservedTokens != 0 || s.Spent.Tokens() != 100 {
			t.Fatalf("state %+v (%v), want nothing reserved and 100 tokens spent once", s, err)
		}
	})
}
