package worker_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// giveBackFrom names the no-call give-back an UpdateItem or
// TransactWriteItems input sends by the state it gives the task back from
// ("queued": ReleaseRequeued, "unknown": ReleaseUnknown, "needs_review":
// ReleaseLapsed); "" for any other write. A give-back is the one write that
// records call_not_started.
func giveBackFrom(params any) string {
	var values map[string]ddbtypes.AttributeValue
	switch in := params.(type) {
	case *dynamodb.UpdateItemInput:
		values = in.ExpressionAttributeValues
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			if it.Update != nil {
				values = it.Update.ExpressionAttributeValues
				break
			}
		}
	}
	class, _ := values[":error_class"].(*ddbtypes.AttributeValueMemberS)
	from, _ := values[":from"].(*ddbtypes.AttributeValueMemberS)
	if class == nil || from == nil || class.Value != ledger.ErrorCallNotStarted {
		return ""
	}
	return from.Value
}

// TestARefusedNoCallGiveBackIsSentAgainFromWhereTheTaskMovedOn: a worker
// whose lease lapsed before it called the provider gives the task and its
// attempt back from where the reconciler put it. When that give-back is
// refused because the task moved on in between — a re-queued lapse to
// unknown for its readback, an unknown task to its park — the worker sends
// the give-back of the new place, so the attempt that made no call is
// neither counted nor reviewed as one that may have acted. A task
// cancelled in between ends cancelled, saying the provider did not act.
//
// Each case starts like a re-queued lapse (a deduplicating provider, so no
// call-start mark; the worker pauses after its claim while the reconciler
// re-queues its lease), optionally moves the task to unknown before the
// worker goes on (AwaitReadback, as the reconciler does for a lapse out of
// budget), and moves it on just before each of the worker's give-backs is
// sent.
func TestARefusedNoCallGiveBackIsSentAgainFromWhereTheTaskMovedOn(t *testing.T) {
	t.Parallel()
	const (
		toUnknown = "unknown"
		toPark    = "park"
		toCancel  = "cancel"
	)
	cases := []struct {
		name      string
		unknown   bool                // moved to unknown before the worker goes on
		before    map[string][]string // a give-back's from-state: the moves made just before it is sent
		wantSent  []string            // the give-backs sent, by from-state
		wantState ledger.State
		wantLog   string // the give-back that succeeded
		resolved  bool   // the park's review resolved as a retry that made no call
		wantClass string // the error class it ends with, where it says why
	}{{
		name:      "requeued then unknown",
		wantSent:  []string{"queued", "unknown"},
		before:    map[string][]string{"queued": {toUnknown}},
		wantState: ledger.StateQueued,
		wantLog:   "the lease had lapsed to unknown before any provider call; released from unknown",
	}, {
		name:      "requeued then parked",
		wantSent:  []string{"queued", "needs_review"},
		before:    map[string][]string{"queued": {toUnknown, toPark}},
		wantState: ledger.StateQueued,
		wantLog:   "the task was parked unknown_outcome before any provider call; the review is resolved and the task released",
		resolved:  true,
	}, {
		name:      "requeued then unknown then parked",
		wantSent:  []string{"queued", "unknown", "needs_review"},
		before:    map[string][]string{"queued": {toUnknown}, "unknown": {toPark}},
		wantState: ledger.StateQueued,
		wantLog:   "the task was parked unknown_outcome before any provider call; the review is resolved and the task released",
		resolved:  true,
	}, {
		name:      "unknown then parked",
		wantSent:  []string{"unknown", "needs_review"},
		unknown:   true,
		before:    map[string][]string{"unknown": {toPark}},
		wantState: ledger.StateQueued,
		wantLog:   "the task was parked unknown_outcome before any provider call; the review is resolved and the task released",
		resolved:  true,
	}, {
		name:      "requeued then cancelled",
		wantSent:  []string{"queued"},
		before:    map[string][]string{"queued": {toCancel}},
		wantState: ledger.StateCancelled,
	}, {
		name:     "unknown then cancelled",
		wantSent: []string{"unknown"},
		unknown:  true,
		before:   map[string][]string{"unknown": {toCancel}},
		// The cancel while running fenced an assignment that made no call,
		// and no earlier attempt's could have acted: ended by what the
		// worker knows, not left to a readback that may be missing.
		wantState: ledger.StateCancelled,
		wantClass: ledger.ErrorCancelledWhileRunning,
		wantLog:   "the task was cancelled while running in between, provider not called",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				ctx := context.Background()
				b := setup(t, e, withSim(simulated.Options{})) // deduplicates: no call-start mark
				task := b.create(t, "refused-giveback-"+strings.ReplaceAll(tc.name, " ", "-"), prompt, func(n *ledger.NewTask) { n.MaxAttempts = 3 })

				var moveErrs []error
				move := func(m string) {
					cur, err := b.l.Get(ctx, task.TaskID)
					if err == nil {
						switch m {
						case toUnknown:
							_, err = b.l.AwaitReadback(ctx, task.TaskID, cur.AssignmentVersion, b.clock.Now().Add(-time.Minute))
						case toPark:
							_, err = b.l.Park(ctx, cur, ledger.ParkOptions{State: ledger.StateUnknown, Version: cur.AssignmentVersion},
								review.UnknownOutcome(cur, "simulated", b.clock.Now(), "the test parks it"))
						case toCancel:
							if cur.State == ledger.StateQueued {
								_, err = b.l.Cancel(ctx, task.TaskID)
							} else {
								_, err = b.l.CancelRunning(ctx, cur)
							}
						}
					}
					if err != nil {
						moveErrs = append(moveErrs, err)
					}
				}
				var sent []string
				before := map[string][]string{}
				for k, v := range tc.before {
					before[k] = v
				}
				hook := middleware.InitializeMiddlewareFunc("moveOnBeforeGiveBack", func(mctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if from := giveBackFrom(in.Parameters); from != "" {
						sent = append(sent, from)
						for _, m := range before[from] {
							move(m)
						}
						delete(before, from) // once: a repeat of the same give-back meets the task as moved
					}
					return next.HandleInitialize(mctx, in)
				})
				cfg := b.e.AWS.Copy()
				cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
					return s.Initialize.Add(hook, middleware.After)
				})
				wl, err := ledger.New(awsclient.DynamoDB(cfg), b.l.Config())
				if err != nil {
					t.Fatal(err)
				}
				b.h.Ledger = wl

				var recErr error
				b.h.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error {
					b.clock.Advance(40 * time.Second) // past the 30 s lease and its grace
					s, err := b.reconcileG(b.sim)
					switch {
					case err != nil:
						recErr = err
					case s.Requeued != 1:
						recErr = errString("the reconciler did not re-queue the lapsed lease")
					case tc.unknown:
						move(toUnknown)
					}
					return nil
				}}

				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))

				if recErr != nil || len(moveErrs) > 0 {
					t.Fatalf("setup: reconciler %v; moves %v", recErr, moveErrs)
				}
				if calls := b.sim.Calls(task.TaskID); calls != 0 {
					t.Fatalf("setup: the provider was called %d time(s)", calls)
				}
				if !slices.Equal(sent, tc.wantSent) {
					t.Errorf("give-backs sent from %v; want from %v", sent, tc.wantSent)
				}
				got := b.get(t, task.TaskID)
				if got.State != tc.wantState {
					t.Fatalf("after give-backs from %v the task is %s at version %d (attempts %d, error %q); want %s",
						sent, got.State, got.AssignmentVersion, got.Attempts, got.ErrorClass, tc.wantState)
				}
				if tc.wantClass != "" && got.ErrorClass != tc.wantClass {
					t.Errorf("ended %s with error %q (%s); want %q", got.State, got.ErrorClass, got.ErrorMessage, tc.wantClass)
				}
				if tc.wantState == ledger.StateQueued {
					if got.Attempts != 0 || got.ErrorClass != ledger.ErrorCallNotStarted || got.AssignmentVersion != 1 {
						t.Errorf("given back from %v: attempts %d, error %q, version %d; want 0, %s, 1 (the attempt made no call)",
							sent, got.Attempts, got.ErrorClass, got.AssignmentVersion, ledger.ErrorCallNotStarted)
					}
				}
				if !strings.Contains(b.logs.String(), tc.wantLog) {
					t.Errorf("no log %q after give-backs from %v", tc.wantLog, sent)
				}
				if tc.resolved {
					r, err := b.l.GetReview(ctx, task.TaskID)
					if err != nil || r.ReviewStatus != ledger.ReviewResolved || r.Resolution != ledger.ResolutionRetry || !strings.Contains(r.ResolutionNote, "made no provider call") {
						t.Errorf("the park's review: %+v, %v; want resolved as retry, saying no call was made", r, err)
					}
				}
			})
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }
