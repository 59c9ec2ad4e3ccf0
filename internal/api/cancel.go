package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// cancelRunning handles a cancel that Ledger.Cancel refused (ce): a
// running task is cancelled through its fencing token
// (ledger.CancelRunning) and answered 202 with the task, now unknown with
// error class cancel_requested (the reconciler ends it cancelled, completed
// from a readback, or parked — DESIGN §13); a task already in that state
// answers the same 202, so a retried cancel is safe. An unknown task that
// was not cancelled (its attempt lapsed, or its outcome was lost) is
// cancelled the same way: the attempt is fenced and the unknown rules end
// it cancelled rather than re-queue it. ok=false leaves every other state
// to the caller's 409.
func (h *Handler) cancelRunning(ctx context.Context, c *call, ce *ledger.ConflictError) (events.APIGatewayV2HTTPResponse, bool) {
	for range 3 { // the task may move between the read and the write
		t := ce.Task
		switch {
		case t == nil:
			return events.APIGatewayV2HTTPResponse{}, false
		case ledger.CancelPending(t):
			c.outcome = "cancel_requested"
			return h.taskResponse(ctx, c, http.StatusAccepted, t, nil), true
		case t.State != ledger.StateRunning && t.State != ledger.StateUnknown:
			return events.APIGatewayV2HTTPResponse{}, false
		}
		nt, err := h.Ledger.CancelRunning(ctx, t)
		if err == nil {
			c.outcome = "cancel_requested"
			return h.taskResponse(ctx, c, http.StatusAccepted, nt, nil), true
		}
		var next *ledger.ConflictError
		if !errors.As(err, &next) {
			if errors.Is(err, ledger.ErrNotFound) {
				return h.reject(c, notFound()), true
			}
			return h.storeFailure(ctx, c, "cancel", err), true
		}
		if next.State == ledger.StateQueued || next.State == ledger.StateRetryWait {
			// Released or re-queued in between: the plain cancel applies.
			qt, qerr := h.Ledger.Cancel(ctx, c.route.taskID)
			if qerr == nil {
				h.settleCancelled(ctx, qt)
				c.outcome = "cancelled"
				return h.taskResponse(ctx, c, http.StatusOK, qt, nil), true
			}
			if !errors.As(qerr, &next) {
				return h.storeFailure(ctx, c, "cancel", qerr), true
			}
		}
		*ce = *next
	}
	return events.APIGatewayV2HTTPResponse{}, false
}

// settleCancelled settles what a cancelled task's earlier attempts still
// hold on its budgets and its caller's daily quota: a queued or
// retry_wait task with attempts behind it was re-queued after a crash,
// and a crashed attempt's hold is settled only by the task's next
// attempt, which a cancel means never comes. Without this the hold stayed
// counted all day, and the caller's other tasks waited for a call that
// would never settle. In full (spend.Accountant.SettleAbandoned): the
// provider may have billed those attempts. After the cancel, best effort,
// logged: a failure leaves the hold counted, the safe side.
func (h *Handler) settleCancelled(ctx context.Context, t *ledger.Task) {
	if h.Budgets == nil || t == nil || t.Kind == ledger.KindDeliver || t.Attempts <= 0 {
		return
	}
	if _, err := h.Budgets.SettleAbandoned(ctx, t, 0); err != nil {
		h.log().WarnContext(ctx, "api: settling a cancelled task's earlier reservations failed; they stay counted", "task_id", t.TaskID, "error", err.Error())
	}
}
