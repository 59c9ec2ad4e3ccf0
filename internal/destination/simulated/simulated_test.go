package simulated_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

const payload = `{"text":"approved release notes 0451"}`

var params = map[string]string{
	simulated.Notify:  `{"to":"requester@example.com"}`,
	simulated.Publish: `{"slug":"release-1-2"}`,
	simulated.CRM:     `{"client_reference":"acme-follow-up-7"}`,
}

func req(name, opID string) destination.Request {
	return destination.Request{OperationID: opID, Attempt: 1, Destination: name, Params: json.RawMessage(params[name]), Payload: json.RawMessage(payload)}
}

func mustNew(t *testing.T, name string, opts simulated.Options) *simulated.Destination {
	t.Helper()
	d, err := simulated.New(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func class(err error) retrypolicy.Class { return retrypolicy.Classify(err).Class }

func TestDeliverReceipts(t *testing.T) {
	t.Parallel()
	sum := destination.HashPayload(json.RawMessage(payload))
	for _, name := range []string{simulated.Notify, simulated.Publish, simulated.CRM} {
		d := mustNew(t, name, simulated.Options{Seed: 7})
		rc, err := d.Deliver(context.Background(), req(name, "op-1"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rc.OperationID != "op-1" || rc.PayloadSHA256 != sum || rc.Destination != name || rc.DestinationIdentity != "simulated:"+name || rc.ProviderRef == "" {
			t.Errorf("%s: receipt %+v", name, rc)
		}
		if (name == simulated.Publish) != (rc.PublicURL == simulated.PublicBase+"release-1-2") {
			t.Errorf("%s: public URL %q", name, rc.PublicURL)
		}
		if d.SideEffects("op-1") != 1 || d.TotalSideEffects() != 1 || d.Calls("op-1") != 1 {
			t.Errorf("%s: side effects %d total %d calls %d", name, d.SideEffects("op-1"), d.TotalSideEffects(), d.Calls("op-1"))
		}
		// Same seed, same reference.
		again := mustNew(t, name, simulated.Options{Seed: 7})
		if rc2, _ := again.Deliver(context.Background(), req(name, "op-1")); rc2.ProviderRef != rc.ProviderRef {
			t.Errorf("%s: reference not deterministic: %s vs %s", name, rc.ProviderRef, rc2.ProviderRef)
		}
	}
}

// TestLostReplyResolvedByReadback: each destination accepts and loses its
// reply; the readback finds the one delivery and nothing is re-sent.
func TestLostReplyResolvedByReadback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wantResult := map[string]string{simulated.Notify: destination.ReadbackFound, simulated.Publish: destination.ReadbackContentMatch, simulated.CRM: destination.ReadbackFound}
	for _, name := range []string{simulated.Notify, simulated.Publish, simulated.CRM} {
		d := mustNew(t, name, simulated.Options{})
		d.Script("op-1", simulated.AcceptLoseReply)
		_, err := d.Deliver(ctx, req(name, "op-1"))
		if class(err) != retrypolicy.UnknownOutcome {
			t.Fatalf("%s: err %v, want uncertain", name, err)
		}
		var fe *simulated.FaultError
		if !errors.As(err, &fe) || fe.Fault != simulated.AcceptLoseReply {
			t.Errorf("%s: not a FaultError: %v", name, err)
		}
		rc, dec, err := destination.Resolve(ctx, d, req(name, "op-1"), false)
		if err != nil || dec.Action != destination.Complete {
			t.Fatalf("%s: Resolve = %+v, %v", name, dec, err)
		}
		if rc.ReadbackResult != wantResult[name] || rc.ReadbackAt.IsZero() || rc.OperationID != "op-1" {
			t.Errorf("%s: readback receipt %+v", name, rc)
		}
		if n := d.SideEffects("op-1"); n != 1 {
			t.Errorf("%s: %d side effects, want exactly 1", name, n)
		}
	}
}

// TestDelayedReadback is seed 001: the public URL shows the release only
// some time after it was published. Before that "not found" is not
// credible, so the rule reads back again instead of re-publishing.
func TestDelayedReadback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := testenv.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	d := mustNew(t, simulated.Publish, simulated.Options{Now: clock.Now, ReadbackDelay: 90 * time.Second})
	if g := d.Guarantees(); g.NotFoundCredible || g.Idempotent || g.Readback != destination.ReadbackByReference {
		t.Fatalf("guarantees %+v", g)
	}
	d.Script("op-1", simulated.AcceptLoseReply)
	if _, err := d.Deliver(ctx, req(simulated.Publish, "op-1")); class(err) != retrypolicy.UnknownOutcome {
		t.Fatalf("err %v", err)
	}
	if _, err := d.Lookup(ctx, req(simulated.Publish, "op-1")); !errors.Is(err, destination.ErrNotFound) {
		t.Fatalf("Lookup before the delay: %v, want not found", err)
	}
	_, dec, err := destination.Resolve(ctx, d, req(simulated.Publish, "op-1"), false)
	if err != nil || dec.Action != destination.Readback {
		t.Fatalf("early Resolve = %+v, %v; want read back later", dec, err)
	}
	_, dec, _ = destination.Resolve(ctx, d, req(simulated.Publish, "op-1"), true)
	if dec.Action != destination.Park || dec.Reason != destination.ReasonUnknownOutcome {
		t.Fatalf("early Resolve when exhausted = %+v; want park", dec)
	}
	if v := d.Visible(); len(v) != 0 {
		t.Fatalf("visible before the delay: %v", v)
	}
	clock.Advance(90 * time.Second)
	if v := d.Visible(); len(v) != 1 || v["release-1-2"].OperationID != "op-1" {
		t.Fatalf("visible after the delay: %v", v)
	}
	rc, dec, err := destination.Resolve(ctx, d, req(simulated.Publish, "op-1"), false)
	if err != nil || dec.Action != destination.Complete || rc.ReadbackResult != destination.ReadbackContentMatch {
		t.Fatalf("late Resolve = %+v %+v, %v", rc, dec, err)
	}
	if !rc.ReadbackAt.Equal(clock.Now()) || rc.PublicURL != simulated.PublicBase+"release-1-2" {
		t.Errorf("receipt %+v", rc)
	}
	if d.SideEffects("op-1") != 1 {
		t.Fatalf("side effects %d", d.SideEffects("op-1"))
	}
	// Other content at the URL is not this operation's publication, nor
	// evidence that it never happened (it may have been overwritten).
	other := req(simulated.Publish, "op-1")
	other.Payload = json.RawMessage(`{"text":"another version"}`)
	if _, err := d.Lookup(ctx, other); !errors.Is(err, simulated.ErrOtherContent) || errors.Is(err, destination.ErrNotFound) {
		t.Fatalf("Lookup of other content: %v, want ErrOtherContent and no ErrNotFound", err)
	}
}

func TestRefusalsDeliverNothing(t *testing.T) {
	t.Parallel()
	d := mustNew(t, simulated.CRM, simulated.Options{ThrottleRetryAfter: 9 * time.Second})
	cases := []struct {
		fault simulated.Fault
		class retrypolicy.Class
		after time.Duration
	}{
		{simulated.Throttle, retrypolicy.Transient, 9 * time.Second},
		{simulated.ServerError, retrypolicy.Transient, 0},
		{simulated.Reject, retrypolicy.PermanentInput, 0},
	}
	for i, tc := range cases {
		op := fmt.Sprintf("op-%d", i)
		d.Script(op, tc.fault)
		_, err := d.Deliver(context.Background(), req(simulated.CRM, op))
		if c := retrypolicy.Classify(err); c.Class != tc.class || c.RetryAfter != tc.after {
			t.Errorf("%s: %v class %v after %v", tc.fault, err, c.Class, c.RetryAfter)
		}
		if d.SideEffects(op) != 0 || d.Calls(op) != 1 {
			t.Errorf("%s: side effects %d, calls %d", tc.fault, d.SideEffects(op), d.Calls(op))
		}
	}
	if d.TotalSideEffects() != 0 {
		t.Fatalf("refusals performed %d side effects", d.TotalSideEffects())
	}
}

func TestIdempotencyIsConfigurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plain := mustNew(t, simulated.Notify, simulated.Options{})
	for range 2 {
		if _, err := plain.Deliver(ctx, req(simulated.Notify, "op-1")); err != nil {
			t.Fatal(err)
		}
	}
	if n := plain.SideEffects("op-1"); n != 2 {
		t.Fatalf("non-idempotent destination: %d side effects for two sends, want 2 (duplicates must be visible)", n)
	}
	if got := plain.Snapshot(); got["op-1"] != 2 || len(got) != 1 {
		t.Fatalf("snapshot %v", got)
	}

	idem := mustNew(t, simulated.Notify, simulated.Options{Guarantees: &destination.Guarantees{Idempotent: true, Readback: destination.ReadbackByOperationID}})
	var wg sync.WaitGroup
	refs := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			rc, err := idem.Deliver(ctx, req(simulated.Notify, "op-1"))
			if err != nil {
				t.Error(err)
			}
			refs <- rc.ProviderRef
		})
	}
	wg.Wait()
	close(refs)
	first := <-refs
	for r := range refs {
		if r != first {
			t.Fatalf("idempotent destination returned references %s and %s", first, r)
		}
	}
	if n := idem.SideEffects("op-1"); n != 1 {
		t.Fatalf("idempotent destination: %d side effects for 16 concurrent sends", n)
	}
}

func TestNoReadback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := mustNew(t, simulated.Notify, simulated.Options{Guarantees: &destination.Guarantees{Readback: destination.ReadbackNone}})
	d.Script("op-1", simulated.AcceptLoseReply)
	if _, err := d.Deliver(ctx, req(simulated.Notify, "op-1")); class(err) != retrypolicy.UnknownOutcome {
		t.Fatal(err)
	}
	if _, err := d.Lookup(ctx, req(simulated.Notify, "op-1")); !errors.Is(err, destination.ErrNoReadback) {
		t.Fatalf("Lookup = %v", err)
	}
	_, dec, err := destination.Resolve(ctx, d, req(simulated.Notify, "op-1"), false)
	if err != nil || dec.Action != destination.Park {
		t.Fatalf("Resolve = %+v %v", dec, err)
	}
	if _, err := simulated.New(simulated.Notify, simulated.Options{Guarantees: &destination.Guarantees{Readback: "maybe"}}); err == nil {
		t.Fatal("accepted an unknown readback mode")
	}
}

func TestCredibleNotFoundRequeues(t *testing.T) {
	t.Parallel()
	d := mustNew(t, simulated.CRM, simulated.Options{})
	_, dec, err := destination.Resolve(context.Background(), d, req(simulated.CRM, "never-sent"), false)
	if err != nil || dec.Action != destination.Requeue {
		t.Fatalf("Resolve = %+v, %v", dec, err)
	}
}

// TestPublishURLShowingOtherContentIsNoCredibleAbsence: without a readback
// delay the publisher's "not found" is credible, but only an empty URL is
// one. A URL showing a later delivery's content may hide an overwritten
// publication of the uncertain one, so Resolve reads it back again and parks
// it when the readback runs out — never re-queues it to publish twice.
func TestPublishURLShowingOtherContentIsNoCredibleAbsence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := mustNew(t, simulated.Publish, simulated.Options{})
	if _, dec, err := destination.Resolve(ctx, d, req(simulated.Publish, "never-sent"), false); err != nil || dec.Action != destination.Requeue {
		t.Fatalf("Resolve of an empty URL = %+v, %v; want a credible absence (requeue)", dec, err)
	}
	d.Script("op-a", simulated.AcceptLoseReply)
	if _, err := d.Deliver(ctx, req(simulated.Publish, "op-a")); class(err) != retrypolicy.UnknownOutcome {
		t.Fatalf("A's lost reply: %v", err)
	}
	b := req(simulated.Publish, "op-b")
	b.Payload = json.RawMessage(`{"text":"a newer version"}`)
	if _, err := d.Deliver(ctx, b); err != nil {
		t.Fatalf("B: %v", err)
	}
	_, dec, err := destination.Resolve(ctx, d, req(simulated.Publish, "op-a"), false)
	if dec.Action != destination.Readback || !errors.Is(err, simulated.ErrOtherContent) {
		t.Fatalf("Resolve of A with B's content at the URL = %+v, %v; want readback later (ErrOtherContent)", dec, err)
	}
	if _, dec, _ := destination.Resolve(ctx, d, req(simulated.Publish, "op-a"), true); dec.Action != destination.Park || dec.Reason != destination.ReasonUnknownOutcome {
		t.Fatalf("Resolve of A once the readback ran out = %+v; want park unknown_outcome", dec)
	}
	if n := d.SideEffects("op-a"); n != 1 {
		t.Fatalf("A published %d times, want 1", n)
	}
}

func TestSeededFaultsAreReproducible(t *testing.T) {
	t.Parallel()
	plan, err := simulated.ParseFaultPlan("accept_lose_reply=0.1, throttle=0.1,server_error=0.1,reject=0.1")
	if err != nil {
		t.Fatal(err)
	}
	run := func() ([]string, map[simulated.Fault]int) {
		d := mustNew(t, simulated.Notify, simulated.Options{Seed: 42, Faults: plan})
		var seq []string
		counts := map[simulated.Fault]int{}
		for i := range 400 {
			_, err := d.Deliver(context.Background(), req(simulated.Notify, fmt.Sprintf("op-%d", i)))
			var fe *simulated.FaultError
			f := simulated.Fault("")
			if errors.As(err, &fe) {
				f = fe.Fault
			}
			counts[f]++
			seq = append(seq, string(f))
		}
		return seq, counts
	}
	a, counts := run()
	b, _ := run()
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatal("same seed, different fault sequence")
	}
	for _, f := range simulated.Faults() {
		if counts[f] < 10 {
			t.Errorf("fault %s drawn %d times in 400 at rate 0.1", f, counts[f])
		}
	}
	if counts[""] < 150 {
		t.Errorf("only %d clean calls in 400 at a 0.6 clean rate", counts[""])
	}
	if plan.String() != "accept_lose_reply=0.1,reject=0.1,server_error=0.1,throttle=0.1" {
		t.Errorf("plan string %q", plan)
	}
}

func TestParseFaultPlanRejects(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"explode=0.1", "throttle", "throttle=2", "throttle=-1", "throttle=x", "throttle=0.6,reject=0.6", "throttle=0.1,throttle=0.1"} {
		if _, err := simulated.ParseFaultPlan(spec); err == nil {
			t.Errorf("accepted %q", spec)
		}
	}
	if p, err := simulated.ParseFaultPlan(" "); err != nil || len(p.Rates) != 0 {
		t.Errorf("empty plan: %v %v", p, err)
	}
}

func TestParamsValidated(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		simulated.Notify:  {`{}`, `{"to":""}`, `{"to":"a@example.com","cc":"x"}`},
		simulated.Publish: {`{}`, `{"slug":"../etc/passwd"}`, `{"slug":"UPPER"}`},
		simulated.CRM:     {`{"client_reference":` + `"` + strings.Repeat("x", 129) + `"}`, `{"client_reference":5}`},
	}
	for name, list := range cases {
		d := mustNew(t, name, simulated.Options{})
		for _, p := range list {
			r := req(name, "op-1")
			r.Params = json.RawMessage(p)
			_, err := d.Deliver(context.Background(), r)
			var pe *destination.ParamsError
			if !errors.As(err, &pe) || class(err) != retrypolicy.PermanentInput {
				t.Errorf("%s %s: err %v, want a permanent *ParamsError", name, p, err)
			}
		}
		if d.Calls("op-1") != 0 || d.TotalSideEffects() != 0 {
			t.Errorf("%s: invalid params reached the destination", name)
		}
	}
	if _, err := simulated.New("email", simulated.Options{}); err == nil {
		t.Error("accepted an unknown name")
	}
	reg, err := destination.NewRegistry(simulated.All(simulated.Options{})...)
	if err != nil || strings.Join(reg.Names(), ",") != "crm,notify,publish" {
		t.Fatalf("registry of All: %v %v", reg, err)
	}
}
