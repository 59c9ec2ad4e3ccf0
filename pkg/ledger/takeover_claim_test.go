package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// counted is a ledger on b's tables and clock whose client counts the
// DynamoDB calls it sends by operation (SDK retries included: each send
// is counted), so a test can pin a method's cost.
func counted(t *testing.T, b *bundle) (*ledger.Ledger, func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int{}
	cfg := b.env.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("countSends",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				mu.Lock()
				n[awsmiddleware.GetOperationName(ctx)]++
				mu.Unlock()
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
	l, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
	if err != nil {
		t.Fatal(err)
	}
	return l, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		c := map[string]int{}
		for k, v := range n {
			c[k] = v
			n[k] = 0
		}
		return c
	}
}

func takeoverOpts(owner string) ledger.ClaimOptions {
	return ledger.ClaimOptions{Owner: owner, Lease: 30 * time.Second, AllowTakeover: true, TakeoverKind: "generate"}
}

// A claim with AllowTakeover of a queued task costs the one conditional
// UpdateItem a plain claim does: the takeover's second write (and kumo's
// stand-in read) are paid only when the claim is refused by a running
// task. A due retry_wait task takes two (claim_retry after the refused
// claim, as without AllowTakeover); a held lease is refused with one write
// and no second; an expired one takes exactly two.
func TestClaimWithTakeoverCostsOneWriteUnlessALeaseExpired(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		l, sends := counted(t, b)
		task := mustCreate(t, b, "takeover-cost")
		c, err := l.Claim(ctx, task.TaskID, takeoverOpts("w1"))
		if err != nil {
			t.Fatal(err)
		}
		if n := sends(); n["UpdateItem"] != 1 || n["GetItem"] != 0 || len(n) != 1 {
			t.Fatalf("claim of a queued task with AllowTakeover sent %v; want one UpdateItem", n)
		}
		if _, err := l.Claim(ctx, task.TaskID, takeoverOpts("w2")); !isReason(err, ledger.ReasonLeased) {
			t.Fatalf("claim of a held lease = %v; want leased", err)
		}
		if n := sends(); n["UpdateItem"] != 1 {
			t.Fatalf("claim of a held lease sent %v; want one UpdateItem (no takeover write)", n)
		}
		if _, err := b.l.ScheduleRetry(ctx, task.TaskID, c.AssignmentVersion, b.clock.Now().Add(time.Second), "throttled", "429"); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Second)
		sends()
		if _, err := l.Claim(ctx, task.TaskID, takeoverOpts("w2")); err != nil {
			t.Fatal(err)
		}
		if n := sends(); n["UpdateItem"] != 2 || n["GetItem"] > 1 {
			t.Fatalf("claim of a due retry_wait task with AllowTakeover sent %v; want two UpdateItems", n)
		}
		b.clock.Advance(31 * time.Second)
		got, err := l.Claim(ctx, task.TaskID, takeoverOpts("w3"))
		if err != nil || got.Attempts != 3 {
			t.Fatalf("takeover: %+v, %v; want attempt 3", got, err)
		}
		if n := sends(); n["UpdateItem"] != 2 {
			t.Fatalf("takeover of an expired lease sent %v; want two UpdateItems", n)
		}
	})
}

// A claim with AllowTakeover of a queued task whose reply is lost (inside
// the SDK's retry loop, or after it) is recognised as the caller's own
// claim: the retry's refusal by the running task it wrote must not be
// taken for someone else's lapsed lease — no second attempt, no open
// outcome, nothing in the history.
func TestClaimWithTakeoverAfterALostReplyIsOneAttempt(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "takeover-claim-lost-"+mode)
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		got, err := l.Claim(ctx, task.TaskID, takeoverOpts("me"))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("claim after a lost reply = %v; want the task this claim took", err)
		}
		cur, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []*ledger.Task{got, cur} {
			if x.State != ledger.StateRunning || x.AssignmentVersion != 1 || x.Attempts != 1 || x.OpenUnknownMs != 0 || len(x.History()) != 1 {
				t.Fatalf("after a lost claim reply: %s v%d attempts %d open %d history %+v; want running v1, attempt 1, nothing open",
					x.State, x.AssignmentVersion, x.Attempts, x.OpenUnknownMs, x.History())
			}
		}
	})
}

// The takeover write's own reply lost, in either way, is recognised by
// its nonce — the second UpdateItem of the claim (the first is the
// refused claim write, whose error reply is not a lost one).
func TestTakeOverRecognisesItsOwnWriteAfterALostReply(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task, c := expiredClaim(t, b, "takeover-lost-"+mode)
		// sdkRetry counts only successful replies (the refused claim's is an
		// error): the first it sees is the takeover's. exhausted counts every
		// call: the takeover is the second.
		nth := int32(2)
		if mode == sdkRetry {
			nth = 1
		}
		l, lost := loseNth(t, b, mode, "UpdateItem", nth)
		got, err := l.Claim(ctx, task.TaskID, takeoverOpts("w2"))
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("takeover after a lost reply = %v; want its own write recognised", err)
		}
		if got.AssignmentVersion != c.AssignmentVersion+1 || got.Attempts != 2 || got.LeaseOwner != "w2" || got.OpenUnknownMs != c.LeaseUntil {
			t.Fatalf("taken over: %+v; want v%d attempt 2 owned by w2, open since %d", got, c.AssignmentVersion+1, c.LeaseUntil)
		}
		if h := got.History(); len(h) != 2 || h[0].Outcome != ledger.OutcomeUnknown {
			t.Fatalf("history %+v; want attempt 1 unknown and attempt 2", h)
		}
	})
}

// Two workers that read the same expired lease race its takeover: one
// wins; the other is refused as leased (the winner's live lease), which
// the worker acknowledges as a duplicate — never a second attempt.
// Sequentially at the same read and concurrently through Claim.
func TestRacingTakeoversOfOneExpiredLeaseOneWins(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task, c := expiredClaim(t, b, "takeover-race")
		read, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.TakeOver(ctx, read, takeoverOpts("w2")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.TakeOver(ctx, read, takeoverOpts("w3")); !isReason(err, ledger.ReasonLeased) {
			t.Fatalf("a second takeover at the same read = %v; want leased", err)
		}

		b.clock.Advance(31 * time.Second) // w2's lease expired too: race two Claims
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = b.l.Claim(ctx, task.TaskID, takeoverOpts([]string{"w4", "w5"}[i]))
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case isReason(err, ledger.ReasonLeased), isReason(err, ledger.ReasonContended):
			default:
				t.Fatalf("the racing takeover's loser got %v; want leased or contended", err)
			}
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if won != 1 || got.Attempts != 3 || got.AssignmentVersion != c.AssignmentVersion+2 {
			t.Fatalf("racing takeovers: %d won (%v), task attempt %d v%d; want one, attempt 3", won, errs, got.Attempts, got.AssignmentVersion)
		}
	})
}

// A takeover refused for its budget names the budget, with the task as
// read (running) so the worker leaves it to the reconciler, and writes
// nothing past the refused claim: no attempts left, at the age deadline
// exactly (the deadline is not "before"), past it, and of another kind.
func TestTakeOverRefusalsNameTheirReason(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		l, sends := counted(t, b)
		type tc struct {
			name   string
			mod    func(*ledger.NewTask)
			at     func(c *ledger.Task) time.Time
			kind   string
			reason string
			budget string
		}
		for _, x := range []tc{
			{"no_attempts_left", func(n *ledger.NewTask) { n.MaxAttempts = 1 }, func(c *ledger.Task) time.Time { return time.UnixMilli(c.LeaseUntil + 1) }, "generate", ledger.ReasonBudgetExhausted, "max_attempts"},
			{"at_the_deadline", func(n *ledger.NewTask) { n.MaxAge = time.Minute }, func(c *ledger.Task) time.Time { return time.UnixMilli(c.DeadlineMs) }, "generate", ledger.ReasonBudgetExhausted, "max_age"},
			{"past_the_deadline", func(n *ledger.NewTask) { n.MaxAge = time.Minute }, func(c *ledger.Task) time.Time { return time.UnixMilli(c.DeadlineMs + 1) }, "generate", ledger.ReasonBudgetExhausted, "max_age"},
			{"other_kind", nil, func(c *ledger.Task) time.Time { return time.UnixMilli(c.LeaseUntil + 1) }, "deliver", ledger.ReasonExpiredLease, ""},
		} {
			t.Run(x.name, func(t *testing.T) {
				n := newTask("takeover-refused-"+x.name, "p")
				if x.mod != nil {
					x.mod(&n)
				}
				task, err := b.l.Create(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				c, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				b.clock.Set(x.at(c))
				sends()
				o := takeoverOpts("w2")
				o.TakeoverKind = x.kind
				_, err = l.Claim(ctx, task.TaskID, o)
				var nc *ledger.NotClaimableError
				if !errors.As(err, &nc) || nc.Reason != x.reason || nc.Budget != x.budget || nc.Task == nil || nc.Task.State != ledger.StateRunning {
					t.Fatalf("takeover refused: %v (%+v); want %s %q with the running task", err, nc, x.reason, x.budget)
				}
				if s := sends(); s["UpdateItem"] != 1 {
					t.Fatalf("a refused takeover sent %v; want only the refused claim's UpdateItem", s)
				}
				if cur, _ := b.l.Get(ctx, task.TaskID); cur.AssignmentVersion != c.AssignmentVersion || cur.Attempts != 1 {
					t.Fatalf("after a refused takeover: v%d attempt %d; want unchanged", cur.AssignmentVersion, cur.Attempts)
				}
			})
		}
	})
}

// A takeover that loses its race to the reconciler's re-queue of the
// same expired lease finds the task queued: the single-write claim took
// it; the two-write claim must not turn that into a refusal the worker
// drops the message on (terminal, parked, leased, unknown, expired_lease,
// not_found are acknowledged). Contended (the message comes back) or a
// claim are acceptable.
func TestTakeOverAfterTheReconcilersRequeueIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task, c := expiredClaim(t, b, "takeover-vs-requeue")
		read, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Requeue(ctx, task.TaskID, ledger.StateRunning, c.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		_, err = b.l.TakeOver(ctx, read, takeoverOpts("w2"))
		if err != nil && !isReason(err, ledger.ReasonContended) {
			t.Fatalf("takeover after the reconciler re-queued = %v; want claimed or contended", err)
		}
	})
}

// A worker that gives back the attempt it took over before calling the
// provider (Release; ReleaseClaim, its claim unconfirmed) returns that
// attempt only: the taken-over attempt's outcome stays open since its
// lease's end, and the history still says it is unknown.
func TestGiveBackAfterATakeoverKeepsTheTakenAttemptOpen(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		for _, how := range []string{"release", "release_claim"} {
			t.Run(how, func(t *testing.T) {
				task, c := expiredClaim(t, b, "takeover-giveback-"+how)
				a2, err := b.l.Claim(ctx, task.TaskID, takeoverOpts("w2/"+how))
				if err != nil {
					t.Fatal(err)
				}
				var got *ledger.Task
				if how == "release" {
					got, err = b.l.Release(ctx, task.TaskID, a2.AssignmentVersion)
				} else {
					var ok bool
					got, ok, err = b.l.ReleaseClaim(ctx, task.TaskID, "w2/"+how, 0)
					if !ok && err == nil {
						err = errors.New("not released")
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				since, open := got.OpenUncertainty()
				h := got.History()
				if got.State != ledger.StateQueued || got.Attempts != 1 || !open || since.UnixMilli() != c.LeaseUntil || len(h) == 0 || h[0].Outcome != ledger.OutcomeUnknown {
					t.Fatalf("given back: %s attempt %d open %v since %v history %+v; want queued, attempt 1 unknown and open since %d",
						got.State, got.Attempts, open, since, h, c.LeaseUntil)
				}
			})
		}
	})
}

// A takeover at a version another takeover has since replaced, whose own
// lease has expired too by the time the loser's write lands, lost a race:
// the reason must say so (contended: the worker's message comes back and
// takes the task over then), not expired_lease, which the worker
// acknowledges as the reconciler's business — leaving a task a worker
// could take over idle until the reconciler's next run.
func TestTakeOverLosingToAnExpiredTakeoverIsContended(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "takeover-lost-race-expired")
		if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w1", Lease: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Second)
		read, err := b.l.Get(ctx, task.TaskID) // the loser's refused claim read this
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.TakeOver(ctx, read, takeoverOpts("w2")); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Second) // the winner's lease lapsed before the loser's write landed
		_, err = b.l.TakeOver(ctx, read, takeoverOpts("w3"))
		if !isReason(err, ledger.ReasonContended) {
			t.Fatalf("takeover at a replaced version = %v; want contended", err)
		}
	})
}
