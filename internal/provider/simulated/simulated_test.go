package simulated_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func req(opID string, attempt int, input string) contract.Request {
	return contract.Request{OperationID: opID, Attempt: attempt, Kind: contract.KindGenerate, Input: json.RawMessage(input)}
}

const prompt = `{"prompt":"the launch code is 0451","system":"answer briefly"}`

func classOf(err error) retrypolicy.Class { return retrypolicy.Classify(err).Class }

func output(t *testing.T, r contract.Result) contract.GenerateOutput {
	t.Helper()
	var out contract.GenerateOutput
	if err := json.Unmarshal(r.Output, &out); err != nil {
		t.Fatalf("output %s: %v", r.Output, err)
	}
	return out
}

func TestGenerateIsDeterministicAndPrivate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, err := simulated.New(simulated.Options{Seed: 7}).Generate(ctx, req("op", 1, prompt))
	if err != nil {
		t.Fatal(err)
	}
	b, err := simulated.New(simulated.Options{Seed: 7}).Generate(ctx, req("op", 1, prompt))
	if err != nil {
		t.Fatal(err)
	}
	c, err := simulated.New(simulated.Options{Seed: 8}).Generate(ctx, req("op", 1, prompt))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Output) != string(b.Output) || a.ProviderRef != b.ProviderRef {
		t.Errorf("same seed, different results:\n%s %s\n%s %s", a.Output, a.ProviderRef, b.Output, b.ProviderRef)
	}
	if string(a.Output) == string(c.Output) {
		t.Errorf("different seeds gave the same output %s", a.Output)
	}
	out := output(t, a)
	if a.Provider != "simulated" || a.ProviderRef == "" || out.Model != simulated.DefaultModel || out.StopReason != "end_turn" {
		t.Errorf("result %+v output %+v", a, out)
	}
	if out.Usage.InputTokens != 7 || out.Usage.OutputTokens != simulated.DefaultOutputWords {
		t.Errorf("usage %+v, want 7 input tokens and %d output", out.Usage, simulated.DefaultOutputWords)
	}
	if strings.Contains(string(a.Output), "0451") || strings.Contains(string(a.Output), "launch") {
		t.Errorf("output echoes the prompt: %s", a.Output)
	}

	capped, err := simulated.New(simulated.Options{}).Generate(ctx, req("op", 1, `{"prompt":"x","max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if o := output(t, capped); o.Usage.OutputTokens != 3 || o.StopReason != "max_tokens" || len(strings.Fields(o.Text)) != 3+5 {
		t.Errorf("max_tokens 3 gave %+v", o)
	}
}

func TestIdempotencyLedger(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{Seed: 1})
	if !p.HonoursIdempotencyKey() {
		t.Fatal("HonoursIdempotencyKey = false by default")
	}
	first, err := p.Generate(t.Context(), req("op", 1, prompt))
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Generate(t.Context(), req("op", 2, prompt))
	if err != nil {
		t.Fatal(err)
	}
	if string(first.Output) != string(again.Output) || first.ProviderRef != again.ProviderRef {
		t.Errorf("re-send returned a different result")
	}
	if _, err := p.Generate(t.Context(), req("other", 1, prompt)); err != nil {
		t.Fatal(err)
	}
	if got := p.SideEffects("op"); got != 1 {
		t.Errorf("SideEffects = %d, want 1", got)
	}
	if got := p.Calls("op"); got != 2 {
		t.Errorf("Calls = %d, want 2", got)
	}
	if got := p.TotalSideEffects(); got != 2 {
		t.Errorf("TotalSideEffects = %d, want 2", got)
	}
	if got := p.Snapshot(); len(got) != 2 || got["op"] != 1 || got["other"] != 1 {
		t.Errorf("Snapshot = %v", got)
	}
	if rec, ok := p.Record("op"); !ok || rec.Calls != 2 || rec.SideEffects != 1 || rec.FirstAt.IsZero() || rec.Result.ProviderRef != first.ProviderRef {
		t.Errorf("Record = %+v, %v", rec, ok)
	}
}

func TestNoIdempotencyCountsEverySideEffect(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{Seed: 1, NoIdempotency: true})
	if p.HonoursIdempotencyKey() {
		t.Fatal("HonoursIdempotencyKey = true with NoIdempotency")
	}
	first, err := p.Generate(t.Context(), req("op", 1, prompt))
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Generate(t.Context(), req("op", 2, prompt))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.SideEffects("op"); got != 2 {
		t.Errorf("SideEffects = %d, want 2", got)
	}
	if string(first.Output) == string(second.Output) || first.ProviderRef == second.ProviderRef {
		t.Errorf("a duplicate generation is indistinguishable from the first")
	}
	got, err := p.Lookup(t.Context(), "op")
	if err != nil || got.ProviderRef != first.ProviderRef {
		t.Errorf("Lookup = %v, %v; want the first result", got.ProviderRef, err)
	}
}

func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	for _, noIdem := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoIdempotency=%t", noIdem), func(t *testing.T) {
			t.Parallel()
			p := simulated.New(simulated.Options{Seed: 3, NoIdempotency: noIdem})
			const n = 32
			refs := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					r, err := p.Generate(t.Context(), req("op", i+1, prompt))
					if err != nil {
						t.Error(err)
					}
					refs[i] = r.ProviderRef
				})
			}
			wg.Wait()
			distinct := len(slices.Compact(slices.Sorted(slices.Values(refs))))
			want := 1
			if noIdem {
				want = n
			}
			if got := p.SideEffects("op"); got != want || distinct != want || p.Calls("op") != n {
				t.Errorf("side effects %d, distinct results %d, calls %d; want %d, %d, %d", got, distinct, p.Calls("op"), want, want, n)
			}
		})
	}
}

func TestScriptedFaults(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{ThrottleRetryAfter: 7 * time.Second})
	p.Script("op", simulated.ServerError, simulated.Throttle, simulated.Credentials, simulated.BadRequest)
	want := []struct {
		class  retrypolicy.Class
		status int
	}{
		{retrypolicy.Transient, 503},
		{retrypolicy.Transient, 429},
		{retrypolicy.PermanentConfig, 401},
		{retrypolicy.PermanentInput, 400},
	}
	for i, w := range want {
		_, err := p.Generate(t.Context(), req("op", i+1, prompt))
		c := retrypolicy.Classify(err)
		var se *retrypolicy.StatusError
		var fe *simulated.FaultError
		if c.Class != w.class || !errors.As(err, &se) || se.StatusCode != w.status || !errors.As(err, &fe) || fe.OperationID != "op" {
			t.Fatalf("call %d: err %v class %v; want class %v status %d", i+1, err, c.Class, w.class, w.status)
		}
		if w.status == 429 && (c.RetryAfter != 7*time.Second || se.RetryAfter != 7*time.Second) {
			t.Errorf("throttle RetryAfter = %v / %v, want 7s", c.RetryAfter, se.RetryAfter)
		}
	}
	if _, err := p.Generate(t.Context(), req("op", 5, prompt)); err != nil {
		t.Fatalf("after the script: %v", err)
	}
	if got := p.SideEffects("op"); got != 1 {
		t.Errorf("SideEffects = %d, want 1 (faults before acceptance do nothing)", got)
	}
}

func TestDefaultThrottleRetryAfter(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{})
	_, err := p.Generate(t.Context(), req("op", 1, `{"prompt":"x","simulate":"throttle"}`))
	if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient || c.RetryAfter != 2*time.Second {
		t.Fatalf("throttle: %v %+v; want transient with 2s", err, c)
	}
}

func TestSimulateField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fault  simulated.Fault
		first  retrypolicy.Class
		second retrypolicy.Class // 0: success
	}{
		{simulated.Throttle, retrypolicy.Transient, 0},
		{simulated.ServerError, retrypolicy.Transient, 0},
		{simulated.AcceptLoseReply, retrypolicy.UnknownOutcome, 0},
		{simulated.BadRequest, retrypolicy.PermanentInput, retrypolicy.PermanentInput},
		{simulated.Credentials, retrypolicy.PermanentConfig, retrypolicy.PermanentConfig},
	}
	for _, tc := range cases {
		t.Run(string(tc.fault), func(t *testing.T) {
			t.Parallel()
			p := simulated.New(simulated.Options{})
			in := `{"prompt":"x","simulate":"` + string(tc.fault) + `"}`
			_, err := p.Generate(t.Context(), req("op", 1, in))
			if got := classOf(err); got != tc.first {
				t.Fatalf("attempt 1: %v (%v), want %v", err, got, tc.first)
			}
			_, err = p.Generate(t.Context(), req("op", 2, in))
			if got := classOf(err); got != tc.second {
				t.Fatalf("attempt 2: %v (%v), want %v", err, got, tc.second)
			}
			wantSE := 0
			if tc.second == 0 {
				wantSE = 1
			}
			if got := p.SideEffects("op"); got != wantSE {
				t.Errorf("SideEffects = %d, want %d", got, wantSE)
			}
		})
	}
}

func TestAcceptLoseReplyThenReadback(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{Seed: 5})
	if _, err := p.Lookup(t.Context(), "op"); !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("Lookup before any call = %v, want ErrNotFound", err)
	}
	p.Script("op", simulated.AcceptLoseReply)
	_, err := p.Generate(t.Context(), req("op", 1, prompt))
	var fe *simulated.FaultError
	if classOf(err) != retrypolicy.UnknownOutcome || !errors.As(err, &fe) || fe.Fault != simulated.AcceptLoseReply {
		t.Fatalf("accept_lose_reply: %v, want an uncertain FaultError", err)
	}
	if got := p.SideEffects("op"); got != 1 {
		t.Fatalf("SideEffects = %d, want 1: the generation happened", got)
	}
	found, err := p.Lookup(t.Context(), "op")
	if err != nil || found.Provider != "simulated" || len(found.Output) == 0 {
		t.Fatalf("Lookup = %+v, %v", found, err)
	}
	resent, err := p.Generate(t.Context(), req("op", 2, prompt))
	if err != nil || resent.ProviderRef != found.ProviderRef || p.SideEffects("op") != 1 {
		t.Fatalf("re-send: %v ref %q (readback %q), side effects %d", err, resent.ProviderRef, found.ProviderRef, p.SideEffects("op"))
	}

	noRB := simulated.New(simulated.Options{NoReadback: true})
	noRB.Script("op", simulated.AcceptLoseReply)
	_, _ = noRB.Generate(t.Context(), req("op", 1, prompt))
	if _, err := noRB.Lookup(t.Context(), "op"); !errors.Is(err, contract.ErrNoReadback) {
		t.Fatalf("Lookup with NoReadback = %v, want ErrNoReadback", err)
	}
}

func TestSlowHonoursCancellation(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{SlowDelay: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	simulated.SetOnWait(p, cancel) // the call is in flight: cancel it, as a fenced worker would
	p.Script("op", simulated.Slow)
	_, err := p.Generate(ctx, req("op", 1, prompt))
	if classOf(err) != retrypolicy.UnknownOutcome || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled slow call: %v (%v), want unknown outcome wrapping context.Canceled", err, classOf(err))
	}
	if got := p.SideEffects("op"); got != 0 {
		t.Errorf("SideEffects = %d, want 0", got)
	}
	if _, err := p.Lookup(t.Context(), "op"); !errors.Is(err, contract.ErrNotFound) {
		t.Errorf("Lookup after an interrupted call = %v, want ErrNotFound", err)
	}

	// A context that is already done: nothing was sent.
	_, err = p.Generate(ctx, req("op2", 1, prompt))
	if classOf(err) != retrypolicy.Transient || !errors.Is(err, retrypolicy.ErrRequestNotSent) || p.Calls("op2") != 0 {
		t.Errorf("done context: %v, calls %d; want transient ErrRequestNotSent and no call", err, p.Calls("op2"))
	}
}

func TestSlowCompletes(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{SlowDelay: time.Millisecond})
	waited := false
	simulated.SetOnWait(p, func() { waited = true })
	if _, err := p.Generate(t.Context(), req("op", 1, `{"prompt":"x","simulate":"slow"}`)); err != nil {
		t.Fatal(err)
	}
	if !waited || p.SideEffects("op") != 1 {
		t.Errorf("waited %v, side effects %d", waited, p.SideEffects("op"))
	}
}

func TestRatesAreReproducible(t *testing.T) {
	t.Parallel()
	plan, err := simulated.ParseFaultPlan("throttle=0.3, server_error=0.2,accept_lose_reply=0.1")
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	run := func(seed int64, concurrent bool) map[string]retrypolicy.Class {
		p := simulated.New(simulated.Options{Seed: seed, Faults: plan})
		var mu sync.Mutex
		got := map[string]retrypolicy.Class{}
		var wg sync.WaitGroup
		for i := range n {
			call := func() {
				id := fmt.Sprintf("op-%d", i)
				_, err := p.Generate(t.Context(), req(id, 1, prompt))
				mu.Lock()
				got[id] = classOf(err)
				mu.Unlock()
			}
			if concurrent {
				wg.Go(call)
			} else {
				call()
			}
		}
		wg.Wait()
		return got
	}
	seq, par, other := run(11, false), run(11, true), run(12, false)
	counts := map[retrypolicy.Class]int{}
	diff := 0
	for id, c := range seq {
		counts[c]++
		if par[id] != c {
			t.Fatalf("%s: sequential %v, concurrent %v", id, c, par[id])
		}
		if other[id] != c {
			diff++
		}
	}
	if diff == 0 {
		t.Error("another seed drew exactly the same faults")
	}
	// 30%+20% transient, 10% unknown, 40% success; wide bounds.
	if tr := counts[retrypolicy.Transient]; tr < n*35/100 || tr > n*65/100 {
		t.Errorf("transient %d of %d", tr, n)
	}
	if un := counts[retrypolicy.UnknownOutcome]; un < n*4/100 || un > n*18/100 {
		t.Errorf("unknown %d of %d", un, n)
	}
}

func TestParseFaultPlan(t *testing.T) {
	t.Parallel()
	plan, err := simulated.ParseFaultPlan(" throttle=0.1,server_error=0.05 , accept_lose_reply=0.02,")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Rates[simulated.Throttle] != 0.1 || plan.Rates[simulated.ServerError] != 0.05 || plan.Rates[simulated.AcceptLoseReply] != 0.02 || len(plan.Rates) != 3 {
		t.Fatalf("plan %v", plan.Rates)
	}
	again, err := simulated.ParseFaultPlan(plan.String())
	if err != nil || again.String() != plan.String() || plan.String() != "accept_lose_reply=0.02,server_error=0.05,throttle=0.1" {
		t.Fatalf("round trip %q -> %q, %v", plan.String(), again.String(), err)
	}
	if empty, err := simulated.ParseFaultPlan(" "); err != nil || len(empty.Rates) != 0 {
		t.Fatalf("empty spec: %v %v", empty, err)
	}
	for _, bad := range []string{"explode=0.1", "throttle", "throttle=x", "throttle=1.5", "throttle=-0.1", "throttle=NaN", "throttle=0.6,server_error=0.6", "throttle=0.1,throttle=0.1"} {
		if _, err := simulated.ParseFaultPlan(bad); err == nil {
			t.Errorf("ParseFaultPlan(%q) accepted", bad)
		}
	}
}

func TestFaultNamesAreTheSimulateValues(t *testing.T) {
	t.Parallel()
	var names []string
	for _, f := range simulated.Faults() {
		names = append(names, string(f))
		if g, err := simulated.ParseFault(string(f)); err != nil || g != f {
			t.Errorf("ParseFault(%q) = %q, %v", f, g, err)
		}
	}
	if !slices.Equal(names, contract.SimulateNames()) {
		t.Fatalf("faults %v, simulate names %v", names, contract.SimulateNames())
	}
	if _, err := simulated.ParseFault("hang"); err == nil {
		t.Error("ParseFault accepted an unknown name")
	}
}

func TestInvalidInputIsPermanentAndNotACall(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{})
	_, err := p.Generate(t.Context(), req("op", 1, `{"prompt":""}`))
	if classOf(err) != retrypolicy.PermanentInput || p.Calls("op") != 0 {
		t.Fatalf("invalid input: %v, calls %d", err, p.Calls("op"))
	}
	_, err = p.Generate(t.Context(), req("", 1, prompt))
	if classOf(err) != retrypolicy.PermanentInput {
		t.Fatalf("no operation id: %v", err)
	}
}

// TestCallTimeoutCutsTheCall: a call longer than the declared call timeout
// ends at it as an uncertain outcome, as a real client's would.
func TestCallTimeoutCutsTheCall(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{SlowDelay: time.Hour, CallTimeout: 20 * time.Millisecond})
	if p.CallTimeout() != 20*time.Millisecond {
		t.Fatalf("CallTimeout = %v", p.CallTimeout())
	}
	p.Script("op", simulated.Slow)
	_, err := p.Generate(t.Context(), req("op", 1, prompt))
	if classOf(err) != retrypolicy.UnknownOutcome || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call past its timeout: %v (%v), want unknown outcome wrapping DeadlineExceeded", err, classOf(err))
	}
	if got := simulated.New(simulated.Options{}).CallTimeout(); got != simulated.DefaultCallTimeout {
		t.Errorf("default CallTimeout = %v", got)
	}
	if simulated.DefaultSlowDelay >= simulated.DefaultCallTimeout {
		t.Errorf("DefaultSlowDelay %v does not fit DefaultCallTimeout %v: a slow call could never succeed", simulated.DefaultSlowDelay, simulated.DefaultCallTimeout)
	}
}
