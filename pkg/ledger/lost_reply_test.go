package ledger_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// How a reply gets lost:
//   - sdkRetry: inside the SDK's retry loop (a 500 after the write), so the
//     SDK sends the write again and the retry fails its condition;
//   - exhausted: outside it (faultinject.LostReply), so the caller sees a
//     timeout after the write was applied.
const (
	sdkRetry  = "sdk_retry"
	exhausted = "retries_exhausted"
)

// loseNth returns a ledger sharing b's tables and clock whose client loses
// the reply of the nth call of op that the server performed successfully
// (sdkRetry: the nth response the SDK reads; exhausted: the nth call).
func loseNth(t *testing.T, b *bundle, mode, op string, nth int32) (l *ledger.Ledger, lost func() bool) {
	t.Helper()
	var seen atomic.Int32
	l, n := loseWhen(t, b, mode, op, func() bool { return seen.Add(1) == nth })
	return l, func() bool { return n.Load() == 1 }
}

// lossy returns a ledger sharing b's tables and clock whose client loses
// the reply of the next call of op (e.g. "UpdateItem") after arm() is called.
func lossy(t *testing.T, b *bundle, mode, op string) (l *ledger.Ledger, arm func(), lost func() bool) {
	t.Helper()
	var armed atomic.Bool
	l, n := loseWhen(t, b, mode, op, func() bool { return armed.CompareAndSwap(true, false) })
	return l, func() { armed.Store(true) }, func() bool { return n.Load() == 1 }
}

// loseWhen is lossy and loseNth: a ledger on b's tables and clock whose
// client loses the reply of a call of op when lose() says so (asked once
// per call of op), counting the losses in n.
func loseWhen(t *testing.T, b *bundle, mode, op string, lose func() bool) (*ledger.Ledger, *atomic.Int32) {
	t.Helper()
	n := new(atomic.Int32)
	cfg := b.env.AWS.Copy()
	switch mode {
	case sdkRetry:
		cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
			return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("loseReplyInRetryLoop",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleDeserialize(ctx, in)
					if err == nil && awsmiddleware.GetOperationName(ctx) == op && lose() {
						n.Add(1)
						resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 500, Header: http.Header{}}}
						return out, md, &smithyhttp.ResponseError{Response: resp, Err: errors.New("connection reset after the write")}
					}
					return out, md, err
				}), middleware.After)
		})
	case exhausted:
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation == op && lose() {
				n.Add(1)
				return faultinject.LostReply
			}
			return ""
		}))
		cfg.APIOptions = append(cfg.APIOptions, inj.Register)
	}
	l, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
	if err != nil {
		t.Fatal(err)
	}
	return l, n
}

func eachLoss(t *testing.T, fn func(t *testing.T, b *bundle, mode string)) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, mode := range []string{sdkRetry, exhausted} {
			t.Run(mode, func(t *testing.T) { fn(t, setup(t, e), mode) })
		}
	})
}

func TestClaimRecognisesItsOwnWriteAfterALostReply(t *testing.T) {
	t.Parallel()
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		ctx := context.Background()
		task := mustCreate(t, b, "claim-lost-"+mode)
		l, arm, lost := lossy(t, b, mode, "UpdateItem")
		arm()
		got, err := l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if !lost() {
			t.Fatal("the fault was not injected")
		}
		if err != nil {
			t.Fatalf("Claim after a lost reply = %v; want the task this claim took", err)
		}
		if got.State != ledger.StateRunning || got.AssignmentVersion != 1 || got.Attempts != 1 || got.LeaseOwner != "me" {
			t.Fatalf("claimed task = state %s version %d attempts %d owner %q", got.State, got.AssignmentVersion, got.Attempts, got.LeaseOwner)
		}
		// Another claimer still sees the live lease.
		if _, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "other", Lease: time.Minute}); !isReason(err, ledger.ReasonLeased) {
			t.Fatalf("second claim = %v, want leased", err)
		}
	})
}

// TestSettlingWritesRecogniseTheirOwnWrite: every fenced write that settles
// an assignment returns its own effect after a lost reply, never a fence.
func TestSettlingWritesRecogniseTheirOwnWrite(t *testing.T) {
	t.Parallel()
	type write struct {
		name string
		do   func(ctx context.Context, l *ledger.Ledger, task *ledger.Task, now time.Time) (*ledger.Task, error)
		want ledger.State
	}
	writes := []write{
		{"complete", func(ctx context.Context, l *ledger.Ledger, t *ledger.Task, _ time.Time) (*ledger.Task, error) {
			return l.Complete(ctx, t.TaskID, t.AssignmentVersion, ledger.Completion{Result: `{"text":"hi"}`, Provider: "sim", ProviderRef: "ref-1"})
		}, ledger.StateCompleted},
		{"schedule_retry", func(ctx context.Context, l *ledger.Ledger, t *ledger.Task, now time.Time) (*ledger.Task, error) {
			return l.ScheduleRetry(ctx, t.TaskID, t.AssignmentVersion, now.Add(time.Minute), "transient", "429")
		}, ledger.StateRetryWait},
		{"mark_unknown", func(ctx context.Context, l *ledger.Ledger, t *ledger.Task, _ time.Time) (*ledger.Task, error) {
			return l.MarkUnknown(ctx, t.TaskID, t.AssignmentVersion, "unknown_outcome", "timeout after send")
		}, ledger.StateUnknown},
		{"fail", func(ctx context.Context, l *ledger.Ledger, t *ledger.Task, _ time.Time) (*ledger.Task, error) {
			return l.Fail(ctx, t.TaskID, t.AssignmentVersion, "permanent_input", "400")
		}, ledger.StateFailed},
		{"release", func(ctx context.Context, l *ledger.Ledger, t *ledger.Task, _ time.Time) (*ledger.Task, error) {
			return l.Release(ctx, t.TaskID, t.AssignmentVersion)
		}, ledger.StateQueued},
		{"park", func(ctx context.Context, l *ledger.Ledger, t *ledger.Task, _ time.Time) (*ledger.Task, error) {
			return l.Park(ctx, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion},
				ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "s"})
		}, ledger.StateNeedsReview},
	}
	eachLoss(t, func(t *testing.T, b *bundle, mode string) {
		for _, w := range writes {
			t.Run(w.name, func(t *testing.T) {
				ctx := context.Background()
				task := mustCreate(t, b, "settle-"+mode+"-"+w.name)
				claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				op := "UpdateItem"
				if w.name == "park" {
					op = "TransactWriteItems"
				}
				l, arm, lost := lossy(t, b, mode, op)
				arm()
				got, err := w.do(ctx, l, claimed, b.clock.Now())
				if !lost() {
					t.Fatal("the fault was not injected")
				}
				if err != nil {
					t.Fatalf("%s after a lost reply = %v; want its own write recognised", w.name, err)
				}
				if got.State != w.want || got.AssignmentVersion != claimed.AssignmentVersion {
					t.Fatalf("%s returned state %s version %d, want %s at version %d", w.name, got.State, got.AssignmentVersion, w.want, claimed.AssignmentVersion)
				}
				stored, err := b.l.Get(ctx, task.TaskID)
				if err != nil || stored.State != w.want {
					t.Fatalf("stored %+v, %v", stored, err)
				}
				if w.want == ledger.StateCompleted && stored.Result != `{"text":"hi"}` {
					t.Fatalf("stored result %q", stored.Result)
				}
				// The same write by a stale holder is still fenced.
				if _, err := w.do(ctx, b.l, claimed, b.clock.Now()); err == nil {
					t.Fatalf("%s repeated by another call succeeded; want a refusal", w.name)
				}
			})
		}
	})
}

// TestNonConditionErrorsAreLabelledByOperation: a validation error from a
// fenced write says which write failed and is not a fence.
func TestNonConditionErrorsAreLabelledByOperation(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "label")
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "me", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("reject",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if awsmiddleware.GetOperationName(ctx) == "UpdateItem" {
						return middleware.InitializeOutput{}, middleware.Metadata{},
							&smithy.GenericAPIError{Code: "ValidationException", Message: "One or more parameter values were invalid", Fault: smithy.FaultClient}
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
		l, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, ledger.Completion{Result: `{}`})
		if err == nil || errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("Complete = %v; want a non-fence error", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "UpdateItem complete") || strings.Contains(msg, "fenced") {
			t.Fatalf("error %q: want it labelled \"UpdateItem complete\", not fenced", msg)
		}
		if !ledger.IsValidation(err) {
			t.Fatalf("IsValidation(%v) = false", err)
		}
	})
}

// TestCompleteFromUnknownAtTheSameVersion: a worker whose lease the
// reconciler expired (running → unknown) still saves its result; a stale
// version cannot.
func TestCompleteFromUnknownAtTheSameVersion(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "lapsed")
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "slow", Lease: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(11 * time.Second)
		if _, err := b.l.ExpireToUnknown(ctx, task.TaskID, claimed.AssignmentVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion-1, ledger.Completion{Result: `{"x":0}`}); !errors.As(err, new(*ledger.FencedError)) {
			t.Fatalf("Complete at a stale version = %v, want FencedError", err)
		}
		got, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, ledger.Completion{Result: `{"x":1}`})
		if err != nil {
			t.Fatalf("Complete from unknown at the same version = %v", err)
		}
		if got.State != ledger.StateCompleted || got.Result != `{"x":1}` || got.StateShard != "" {
			t.Fatalf("completed = %+v", got)
		}
		var fe *ledger.FencedError
		if _, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, ledger.Completion{Result: `{"x":2}`}); !errors.As(err, &fe) || fe.Why != "already_completed" {
			t.Fatalf("second Complete = %v, want already_completed", err)
		}
	})
}

// TestCreateReplacesAnItemPastItsTTL: an item whose expires_at passed but
// which DynamoDB's sweeper has not deleted yet is treated as absent.
func TestCreateReplacesAnItemPastItsTTL(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "ttl")
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		done, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, ledger.Completion{Result: `{"old":true}`})
		if err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(ledger.DefaultRetention - time.Minute)
		if _, err := b.l.Create(ctx, newTask("ttl", "p")); !errors.As(err, new(*ledger.DuplicateError)) {
			t.Fatalf("Create within the retention window = %v, want a replay", err)
		}
		b.clock.Set(time.Unix(done.ExpiresAt+1, 0))
		fresh, err := b.l.Create(ctx, newTask("ttl", "p"))
		if err != nil {
			t.Fatalf("Create past expires_at = %v, want a fresh task", err)
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if fresh.State != ledger.StateQueued || got.State != ledger.StateQueued || got.Result != "" || got.Attempts != 0 || got.ExpiresAt != 0 {
			t.Fatalf("after re-create: state %s result %q attempts %d expires_at %d", got.State, got.Result, got.Attempts, got.ExpiresAt)
		}
		// A different payload past TTL is a new task too, not a mismatch.
		b.clock.Advance(time.Second)
		if _, err := b.l.Create(ctx, newTask("ttl", "p")); !errors.As(err, new(*ledger.DuplicateError)) {
			t.Fatalf("replay of the fresh task = %v, want a duplicate", err)
		}
	})
}
