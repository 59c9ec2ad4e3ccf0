package api_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestApprovalThatCompletesAGatedTaskNotifiesTheRequester: DESIGN §15 —
// the requester is "notified … when their task completes, fails or is
// parked", and a notification is an effect created with the transition that
// causes it (docs/destinations.md: `completed` | the requester | the
// completion). A gated task does not complete when the worker saves its
// result: it goes to awaiting_approval, and followup.Completion files the
// requester's notification under the completed state only, so none is
// created then. It completes at POST /tasks/{id}/approve — whose
// transaction creates the plan's deliveries and nothing else. The
// requester of a gated task is never told it completed: the notification
// is lost.
//
// Sequence: submit a gated task (requester notifications configured);
// the worker's completion (its follow-ups as the worker builds them) →
// awaiting_approval; approve → completed. Want: one requester notification
// of event completed among the task's children.
func TestApprovalThatCompletesAGatedTaskNotifiesTheRequester(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b, notify, id := gatedWithRequesterNotifications(t, e, "wf-requester-notify")

		// The worker's completion, with the follow-ups the worker builds.
		ctx := context.Background()
		c, err := b.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		fu, err := notify.Completion(c, generated)
		if err != nil {
			t.Fatal(err)
		}
		done, err := b.l.Complete(ctx, id, c.AssignmentVersion, ledger.Completion{Result: generated, ApprovalTTL: c.ApprovalTTL(), FollowUps: fu})
		if err != nil {
			t.Fatal(err)
		}
		if done.State != ledger.StateAwaitingApproval {
			t.Fatalf("gated completion left %s", done.State)
		}

		v := view(t, b.do(t, decisionReq("approve", id, `{"artifact_sha256":"`+ledger.SHA256Hex(generated)+`"}`)))
		if v.State != string(ledger.StateCompleted) {
			t.Fatalf("approval left %s", v.State)
		}
		if completed := completedNotifications(t, b, id); len(completed) != 1 {
			t.Fatalf("the gated task completed (approved) and its requester got %d completed notifications %v, want 1 "+
				"(DESIGN §15: notified when their task completes)", len(completed), completed)
		}
	})
}

// The requester's completed notification is keyed by the approval round it
// completes: a replayed approve, and an identical approval that read the
// task before another won the race, create no second one; an approval
// after a withdrawal completes the task again (a new round) and tells the
// requester once more.
func TestApprovalNotifiesTheRequesterOncePerApprovalRound(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b, notify, id := gatedWithRequesterNotifications(t, e, "wf-requester-rounds")
		generateAs(t, b, id)
		ctx := context.Background()
		awaiting, err := b.l.Get(ctx, id) // read before the approval that wins
		if err != nil {
			t.Fatal(err)
		}
		sha := ledger.SHA256Hex(generated)
		approve := `{"artifact_sha256":"` + sha + `"}`
		wantStatus(t, b.do(t, decisionReq("approve", id, approve)), http.StatusOK)
		wantStatus(t, b.do(t, decisionReq("approve", id, approve)), http.StatusOK) // a replay
		req, err := api.ApproveAsOperator(awaiting, sha, "", "operator:racer", "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req.FollowUps = notify.Approved(awaiting)
		if _, replay, err := b.l.Approve(ctx, awaiting, req); err != nil || !replay {
			t.Fatalf("an identical approval that lost the race: replay=%v err=%v, want a replay", replay, err)
		}
		round0 := followup.Key(id, followup.EventCompleted, 0, followup.SNSDestination)
		if got := completedNotifications(t, b, id); !slices.Equal(got, []string{round0}) {
			t.Fatalf("after an approval, its replay and a racing identical approval: completed notifications %v, want [%s]", got, round0)
		}

		wantStatus(t, b.do(t, decisionReq("withdraw", id, `{"note":"wrong customer"}`)), http.StatusOK)
		wantStatus(t, b.do(t, decisionReq("approve", id, approve)), http.StatusOK)
		round1 := followup.Key(id, followup.EventCompleted, 1, followup.SNSDestination)
		if got := completedNotifications(t, b, id); !slices.Equal(got, []string{round0, round1}) {
			t.Fatalf("after a re-approval in round 1: completed notifications %v, want [%s %s]", got, round0, round1)
		}
	})
}

// gatedWithRequesterNotifications submits a gated plan (key) to an API
// whose requester notifications go to an SNS topic.
func gatedWithRequesterNotifications(t *testing.T, e *testenv.Env, key string) (*bundle, *followup.Config, string) {
	t.Helper()
	notify, err := followup.Parse(`{"page_origin":"https://tasks.example.com","requester":{"sns_topic":"requests"}}`)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, e, withHandler(func(h *api.Handler) { h.Notify = notify }))
	return b, notify, view(t, b.do(t, submitReq(key, planBody))).TaskID
}

// completedNotifications are the keys, sorted, of task id's notifications
// of event completed.
func completedNotifications(t *testing.T, b *bundle, id string) []string {
	t.Helper()
	var ks []string
	for _, n := range notificationsOf(t, b, id) {
		if n.Provenance.Event == followup.EventCompleted {
			ks = append(ks, n.IdempotencyKey)
		}
	}
	slices.Sort(ks)
	return ks
}
