package admission_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// t0 starts a window (a whole minute), ahead of the real time: a window
// item expires an hour after its window, and kumo deletes items whose
// expires_at is before the real time (every 30 s), so on a past date a
// window's count could vanish mid-test.
var t0 = testenv.NextUTCDay(time.Now()).Add(12 * time.Hour)

type bundle struct {
	env   *testenv.Env
	clock *testenv.Clock
	adm   *admission.Admitter
	inj   *faultinject.Injector
}

// setup builds an Admitter on e's tasks table, its client passing through a
// fault injector following s (nil: none).
func setup(t *testing.T, e *testenv.Env, s faultinject.Schedule, limits map[string]admission.Limit) *bundle {
	t.Helper()
	b := &bundle{env: e, clock: testenv.NewClock(t0.Add(5 * time.Second)), inj: faultinject.New(s)}
	cfg := e.AWS.Copy()
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), b.inj.Register)
	adm, err := admission.New(admission.Config{
		DB: awsclient.DynamoDB(cfg), TasksTable: e.Names.TasksTable, Limits: limits, Now: b.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.adm = adm
	return b
}

// burst runs n concurrent Admits and returns the tickets and refusals.
func (b *bundle) burst(t *testing.T, model string, n int, est int64) (admitted []*admission.Ticket, refused []*admission.NotAdmittedError) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := b.adm.Admit(context.Background(), model, est)
			mu.Lock()
			defer mu.Unlock()
			var na *admission.NotAdmittedError
			switch {
			case err == nil:
				admitted = append(admitted, tk)
			case errors.As(err, &na):
				refused = append(refused, na)
			default:
				t.Errorf("admit: %v", err)
			}
		}()
	}
	wg.Wait()
	return admitted, refused
}

func TestBurstAdmitsExactlyTheRequestLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, nil, map[string]admission.Limit{"m1": {RequestsPerWindow: 7, TokensPerWindow: 1_000_000}})
		ok, no := b.burst(t, "m1", 40, 10)
		if len(ok) != 7 || len(no) != 33 {
			t.Fatalf("admitted %d, refused %d; want 7 and 33", len(ok), len(no))
		}
		// One UpdateItem per Admit, admitted or refused, plus the one seal
		// of the previous window, and nothing else.
		if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 41 || len(c) != 1 {
			t.Fatalf("calls %v, want exactly 41 DynamoDB.UpdateItem (40 admits, 1 seal)", c)
		}
		// The earliest moment a call fits: when the burst's slot (5 s..10 s)
		// has left the last minute. An engine that returns no item with a
		// failed condition (kumo) gets the next window, the safe side.
		want := t0.Add(time.Minute + 10*time.Second)
		if e.Backend == "kumo" {
			want = t0.Add(time.Minute)
		}
		for _, r := range no {
			if !r.RetryAt.Equal(want) {
				t.Fatalf("RetryAt = %s, want %s", r.RetryAt, want)
			}
		}
		w, err := b.adm.Read(context.Background(), "m1", b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if w.Requests != 7 || w.Tokens != 70 {
			t.Fatalf("window = %+v, want 7 requests, 70 tokens", w)
		}
		// One minute later the 7 calls are still within the last 60 s (a
		// provider's rolling window would count them): nothing is admitted,
		// without a write, until their slot has left it.
		b.clock.Advance(time.Minute)
		e.Counter.Reset()
		ok, no = b.burst(t, "m1", 12, 10)
		if len(ok) != 0 || len(no) != 12 {
			t.Fatalf("60 s after the burst: admitted %d, refused %d; want 0 and 12", len(ok), len(no))
		}
		if c := e.Counter.Calls(); c["DynamoDB.UpdateItem"] != 1 || len(c) != 1 {
			t.Fatalf("calls %v, want only the seal of the previous window", c)
		}
		slotEnd := t0.Add(time.Minute + 10*time.Second) // slots are 5 s; the burst was at 5 s
		for _, r := range no {
			if !r.RetryAt.Equal(slotEnd) {
				t.Fatalf("RetryAt = %s, want %s, when the burst's slot leaves the last minute", r.RetryAt, slotEnd)
			}
		}
		b.clock.Set(slotEnd)
		ok, no = b.burst(t, "m1", 12, 10)
		if len(ok) != 7 || len(no) != 5 {
			t.Fatalf("next window: admitted %d, refused %d; want 7 and 5", len(ok), len(no))
		}
		for _, tk := range ok {
			if !tk.WindowStart.Equal(t0.Add(time.Minute)) || tk.Writes != 1 || tk.Slot != 2 {
				t.Fatalf("ticket %+v: want window %s and 1 write", tk, t0.Add(time.Minute))
			}
		}
	})
}

func TestBurstAdmitsExactlyTheTokenLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, nil, map[string]admission.Limit{"m1": {RequestsPerWindow: 1000, TokensPerWindow: 1000}})
		ok, no := b.burst(t, "m1", 20, 300)
		if len(ok) != 3 || len(no) != 17 {
			t.Fatalf("admitted %d, refused %d; want 3 and 17", len(ok), len(no))
		}
		// A smaller call still fits in the 100 tokens left.
		if _, err := b.adm.Admit(context.Background(), "m1", 100); err != nil {
			t.Fatalf("100 tokens with 100 left: %v", err)
		}
		var na *admission.NotAdmittedError
		if _, err := b.adm.Admit(context.Background(), "m1", 1); !errors.As(err, &na) {
			t.Fatalf("1 token with 0 left: got %v, want NotAdmittedError", err)
		}
	})
}

func TestSettleCorrectsTheWindow(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil, map[string]admission.Limit{"m1": {RequestsPerWindow: 10, TokensPerWindow: 1000}})
		tk, err := b.adm.Admit(ctx, "m1", 600)
		if err != nil {
			t.Fatal(err)
		}
		var na *admission.NotAdmittedError
		if _, err := b.adm.Admit(ctx, "m1", 500); !errors.As(err, &na) {
			t.Fatalf("500 more with 400 left: got %v, want NotAdmittedError", err)
		}
		e.Counter.Reset()
		if err := b.adm.Settle(ctx, tk, 200); err != nil {
			t.Fatal(err)
		}
		if got := e.Counter.Calls()["DynamoDB.UpdateItem"]; got != 1 {
			t.Fatalf("settle made %d UpdateItem calls, want 1", got)
		}
		w, _ := b.adm.Read(ctx, "m1", b.clock.Now())
		if w.Tokens != 200 || w.Requests != 1 {
			t.Fatalf("after settle window = %+v, want 1 request, 200 tokens", w)
		}
		if _, err := b.adm.Admit(ctx, "m1", 500); err != nil {
			t.Fatalf("500 more with 800 left after settle: %v", err)
		}
		// Equal usage: no call at all.
		e.Counter.Reset()
		tk2, _ := b.adm.Admit(ctx, "m1", 50)
		e.Counter.Reset()
		if err := b.adm.Settle(ctx, tk2, 50); err != nil || len(e.Counter.Calls()) != 0 {
			t.Fatalf("settle with usage = estimate: err %v, calls %v; want nil and none", err, e.Counter.Calls())
		}
		// An expired (deleted) window is not resurrected.
		gone := &admission.Ticket{Model: "m1", Key: admission.WindowKey("m1", t0.Add(-time.Hour)), EstimatedTokens: 10}
		if err := b.adm.Settle(ctx, gone, 30); err != nil {
			t.Fatalf("settle of a gone window: %v", err)
		}
		out, err := e.DDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.Names.TasksTable, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: gone.Key}}})
		if err != nil || len(out.Item) != 0 {
			t.Fatalf("gone window: item %v, err %v; want none", out.Item, err)
		}
	})
}

func TestWindowItemShape(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, nil, map[string]admission.Limit{"m1": {RequestsPerWindow: 10, TokensPerWindow: 1000}})
		tk, err := b.adm.Admit(ctx, "m1", 10)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Key != "adm#m1#"+itoa(t0.Unix()) {
			t.Fatalf("key %q", tk.Key)
		}
		out, err := e.DDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.Names.TasksTable, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: tk.Key}}})
		if err != nil {
			t.Fatal(err)
		}
		exp, ok := out.Item["expires_at"].(*types.AttributeValueMemberN)
		if !ok || exp.Value != itoa(t0.Add(time.Minute+time.Hour).Unix()) {
			t.Fatalf("expires_at = %v, want window end + 1h", out.Item["expires_at"])
		}
		for _, a := range []string{"state_shard", "due_at", "state"} {
			if _, ok := out.Item[a]; ok {
				t.Fatalf("window item carries %s: it would enter the by_state index or look like a task", a)
			}
		}
		// 1 write unit per admit: the item (an upper bound of DynamoDB's
		// size rules: names plus value text) stays under 1 KB, even with a
		// 256-byte model id.
		if n := sizeUpperBound(out.Item) + 256; n >= 1024 {
			t.Fatalf("window item is up to %d bytes: an admit would cost more than 1 write unit", n)
		}
	})
}

func TestLostReplyCountsOnce(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		key := admission.WindowKey("m1", t0)
		plan := faultinject.NewPlan()
		plan.Add(key, faultinject.Step{Service: "DynamoDB", Operation: "UpdateItem", N: 1, Kind: faultinject.LostReply})
		b := setup(t, e, plan, map[string]admission.Limit{"m1": {RequestsPerWindow: 3, TokensPerWindow: 1000}})
		tk, err := b.adm.Admit(ctx, "m1", 100)
		if err != nil {
			t.Fatalf("admit after a lost reply: %v", err)
		}
		if b.inj.Total(faultinject.LostReply) != 1 || tk.Writes != 2 {
			t.Fatalf("lost replies %d, writes %d; want 1 and 2", b.inj.Total(faultinject.LostReply), tk.Writes)
		}
		w, _ := b.adm.Read(ctx, "m1", b.clock.Now())
		if w.Requests != 1 || w.Tokens != 100 {
			t.Fatalf("window = %+v, want counted once (1 request, 100 tokens)", w)
		}
	})
}

func TestLostReplyWithAnInterveningWriterOverCountsByOne(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		key := admission.WindowKey("m1", t0)
		limits := map[string]admission.Limit{"m1": {RequestsPerWindow: 5, TokensPerWindow: 1000}}
		other := setup(t, e, nil, limits)
		other.clock.Set(t0.Add(5 * time.Second))
		// The lost reply's write lands, then another instance admits before
		// the retry: our nonce is gone, so the retry reserves again.
		inj := faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.TaskID == key && c.Operation == "UpdateItem" && c.N == 1 {
				return faultinject.LostReply
			}
			return ""
		})
		b := setup(t, e, inj, limits)
		b.inj.OnInject = func(faultinject.Call, faultinject.Kind) {
			if _, err := other.adm.Admit(ctx, "m1", 10); err != nil {
				t.Errorf("intervening admit: %v", err)
			}
		}
		tk, err := b.adm.Admit(ctx, "m1", 100)
		if err != nil {
			t.Fatalf("admit: %v", err)
		}
		w, _ := b.adm.Read(ctx, "m1", b.clock.Now())
		// 1 intervening + our call counted twice: over by exactly one reservation.
		if tk.Writes != 2 || w.Requests != 3 || w.Tokens != 210 {
			t.Fatalf("writes %d, window %+v; want 2 writes, 3 requests, 210 tokens", tk.Writes, w)
		}
	})
}

func TestLostReplyAcrossAWindowRollReservesInTheNewWindow(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		key := admission.WindowKey("m1", t0)
		plan := faultinject.NewPlan()
		plan.Add(key, faultinject.Step{Service: "DynamoDB", Operation: "UpdateItem", N: 1, Kind: faultinject.LostReply})
		b := setup(t, e, plan, map[string]admission.Limit{"m1": {RequestsPerWindow: 5, TokensPerWindow: 1000}})
		b.inj.OnInject = func(faultinject.Call, faultinject.Kind) { b.clock.Advance(time.Minute) }
		tk, err := b.adm.Admit(ctx, "m1", 100)
		if err != nil {
			t.Fatalf("admit: %v", err)
		}
		if !tk.WindowStart.Equal(t0.Add(time.Minute)) {
			t.Fatalf("ticket window %s, want the new window %s (the call is made now)", tk.WindowStart, t0.Add(time.Minute))
		}
		old, _ := b.adm.Read(ctx, "m1", t0)
		cur, _ := b.adm.Read(ctx, "m1", t0.Add(time.Minute))
		if old.Requests != 1 || cur.Requests != 1 {
			t.Fatalf("old window %+v, new window %+v; want 1 request each (the old one wasted, never under-counted)", old, cur)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	db := &dynamodb.Client{}
	if _, err := admission.New(admission.Config{DB: db, TasksTable: "x", Limits: map[string]admission.Limit{"m": {RequestsPerWindow: 0, TokensPerWindow: 5}}}); err == nil {
		t.Fatal("zero request limit accepted")
	}
	if _, err := admission.New(admission.Config{DB: db, TasksTable: "x", Window: 1500 * time.Millisecond}); err == nil {
		t.Fatal("fractional window accepted")
	}
	a, err := admission.New(admission.Config{DB: db, TasksTable: "x", Limits: map[string]admission.Limit{"m": {RequestsPerWindow: 1, TokensPerWindow: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	var um *admission.UnknownModelError
	if _, err := a.Admit(context.Background(), "other", 1); !errors.As(err, &um) || um.Model != "other" {
		t.Fatalf("unknown model: got %v", err)
	}
	var tl *admission.EstimateTooLargeError
	if _, err := a.Admit(context.Background(), "m", 6); !errors.As(err, &tl) || tl.Limit != 5 {
		t.Fatalf("estimate over the limit: got %v", err)
	}
	if !admission.IsWindowKey("adm#m#0") || admission.IsWindowKey("t_abc") {
		t.Fatal("IsWindowKey")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sizeUpperBound over-estimates an item's DynamoDB size: attribute names
// plus the text of S and N values (a number is stored in fewer bytes than
// its digits).
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
			n += 1024 // unexpected type: fail the bound
		}
	}
	return n
}

// TestBurstWithLostRepliesKeepsTheBound: under a burst with lost replies,
// no window passes its limit, nothing admitted goes uncounted, and the
// over-count is at most one reservation per lost reply.
func TestBurstWithLostRepliesKeepsTheBound(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		// Which burst writes are applied depends on the goroutines' order,
		// and only an applied write's reply can be lost: the first write,
		// sent alone into the empty window, loses its reply for certain.
		rates := faultinject.Rates{Seed: 14, Rules: []faultinject.Rule{{Service: "DynamoDB", Operation: "UpdateItem", Kind: faultinject.LostReply, Rate: 0.3}}}
		first := faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation == "UpdateItem" && c.N == 1 {
				return faultinject.LostReply
			}
			return rates.Decide(c)
		})
		b := setup(t, e, first, map[string]admission.Limit{"anthropic.claude-x": {RequestsPerWindow: 9, TokensPerWindow: 1_000_000}})
		var mu sync.Mutex
		var wg sync.WaitGroup
		admitted, refused, unknown := 0, 0, 0
		admit := func() {
			_, err := b.adm.Admit(context.Background(), "anthropic.claude-x", 10)
			mu.Lock()
			defer mu.Unlock()
			var na *admission.NotAdmittedError
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &na):
				refused++
			case admission.Ambiguous(err):
				unknown++ // not made: counted at most, never under-counted
			default:
				t.Errorf("admit: %v", err)
			}
		}
		admit()
		for range 39 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				admit()
			}()
		}
		wg.Wait()
		lost := b.inj.Total(faultinject.LostReply)
		w, err := b.adm.Read(context.Background(), "anthropic.claude-x", b.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("admitted %d, refused %d, unknown %d, lost replies %d, window %+v", admitted, refused, unknown, lost, w)
		if lost == 0 {
			t.Fatal("no lost reply injected: the test proves nothing")
		}
		if w.Requests > 9 || int64(admitted) > w.Requests || w.Requests-int64(admitted) > int64(lost) {
			t.Fatalf("window %d requests, %d admitted, %d lost replies: want admitted <= window <= 9 and over-count <= lost replies", w.Requests, admitted, lost)
		}
		if w.Tokens != 10*w.Requests {
			t.Fatalf("window tokens %d for %d requests", w.Tokens, w.Requests)
		}
	})
}
