package simulated_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
)

// Every call that reaches the provider and every lookup is an event with
// its outcome, in order; every generation's result is kept.
func TestEventsRecordStartsAndOutcomes(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{NoIdempotency: true, LongDelay: time.Hour})
	p.Script("op", simulated.ServerError, simulated.AcceptLoseReply, simulated.Long)
	ctx := t.Context()
	if _, err := p.Generate(ctx, req("op", 1, prompt)); err == nil {
		t.Fatal("scripted 503 succeeded")
	}
	if _, err := p.Generate(ctx, req("op", 2, prompt)); err == nil {
		t.Fatal("scripted lost reply succeeded")
	}
	if _, err := p.Lookup(ctx, "op"); err != nil {
		t.Fatalf("lookup after a performed call: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	simulated.SetOnWait(p, cancel) // the long call is in flight: cut it
	if _, err := p.Generate(cctx, req("op", 3, prompt)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut long call: %v", err)
	}
	simulated.SetOnWait(p, nil)
	if _, err := p.Generate(ctx, req("op", 4, prompt)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(context.Background(), req("other", 1, prompt)); err != nil {
		t.Fatal(err)
	}

	want := []struct {
		kind    simulated.EventKind
		outcome simulated.Outcome
	}{
		{simulated.EventCall, simulated.OutcomeRejected},
		{simulated.EventCall, simulated.OutcomeLostReply},
		{simulated.EventLookup, simulated.OutcomeFound},
		{simulated.EventCall, simulated.OutcomeInterrupted},
		{simulated.EventCall, simulated.OutcomePerformed},
	}
	evs := p.Events("op")
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, w := range want {
		e := evs[i]
		if e.Kind != w.kind || e.Outcome != w.outcome || e.Start.IsZero() || e.End.Before(e.Start) {
			t.Errorf("event %d = %+v, want %s %s", i, e, w.kind, w.outcome)
		}
	}
	if p.Starts("op") != 4 {
		t.Errorf("Starts = %d, want 4", p.Starts("op"))
	}
	if rs := p.Results("op"); len(rs) != 2 || rs[0].ProviderRef == rs[1].ProviderRef {
		t.Errorf("results %+v, want two distinct generations", rs)
	}
	if simulated.OutcomeRejected.Uncertain() || !simulated.OutcomeInterrupted.Uncertain() || !simulated.OutcomePerformed.Uncertain() {
		t.Error("only a rejection is certain")
	}
}

func TestLookupWithoutReadbackIsAnEvent(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{NoReadback: true})
	if _, err := p.Lookup(t.Context(), "op"); !errors.Is(err, contract.ErrNoReadback) {
		t.Fatalf("Lookup = %v, want ErrNoReadback", err)
	}
	if evs := p.Events("op"); len(evs) != 1 || evs[0].Outcome != simulated.OutcomeNoReadback {
		t.Errorf("events %+v, want one no_readback lookup", evs)
	}
}

func TestOversizedOutputExceedsTheItemLimit(t *testing.T) {
	t.Parallel()
	p := simulated.New(simulated.Options{})
	p.Script("op", simulated.Oversized)
	res, err := p.Generate(t.Context(), req("op", 1, `{"prompt":"x","max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) <= 400*1024 || len(res.Output) < simulated.DefaultOversizeBytes {
		t.Errorf("output of %d bytes, want more than %d", len(res.Output), simulated.DefaultOversizeBytes)
	}
	out := output(t, res)
	if out.Text == "" {
		t.Error("oversized output has no text")
	}
	// The next call of the operation is an ordinary one (idempotent: the
	// recorded result).
	again, err := p.Generate(t.Context(), req("op", 2, `{"prompt":"x","max_tokens":8}`))
	if err != nil || again.ProviderRef != res.ProviderRef {
		t.Errorf("idempotent repeat: %v, ref %q want %q", err, again.ProviderRef, res.ProviderRef)
	}
}

func TestLongIsNotASimulateValue(t *testing.T) {
	t.Parallel()
	for _, f := range []simulated.Fault{simulated.Long, simulated.Oversized} {
		if _, err := simulated.ParseFault(string(f)); err == nil {
			t.Errorf("ParseFault(%q) accepted a script-only fault", f)
		}
	}
}
