package worker

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// markCallStarted writes the call-start mark when the step does not
// deduplicate by operation id (doc.go, "The call-start mark"), repeated
// like a settling write. ok=false means the provider must not be called
// and r is the record's result. leaseUntil is the lease end the mark left
// (0: no mark needed), for leaseForCall.
func (h *Handler) markCallStarted(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) (leaseUntil int64, r result, ok bool) {
	if provider.HonoursIdempotency(h.step(t)) { // a retry-safe generation is marked too
		return 0, result{}, true
	}
	err := h.save(ctx, rec, t, "call_started", func(o ...ledger.WriteOption) (*ledger.Task, error) {
		m, err := h.Ledger.MarkCallStarted(ctx, t.TaskID, t.AssignmentVersion, h.lease(), append(o, ledger.WithAgeDeadline(t.DeadlineMs))...)
		if err == nil {
			leaseUntil, t.CallStartedMs = m.LeaseUntil, m.CallStartedMs // the attempt history's call start
		}
		return m, err
	}, log)
	if err == nil {
		return leaseUntil, result{}, true
	}
	var fe *ledger.FencedError
	if errors.As(err, &fe) {
		// A repeat may find its first send applied and the lease lapsed since:
		// no call was made, the task is given back.
		r := h.uncalledRefusal(ctx, rec, t, "call-start mark", fe, log)
		if r.retry {
			h.setVisibility(ctx, rec, 0, log)
		}
		return 0, r, false
	}
	return 0, h.giveBackUncalled(ctx, rec, t, 0, "call-start mark failed", log, "error", err.Error()), false
}

// errLeaseShort: the renewal before a marked call left less than a
// heartbeat of lease by the time it was answered.
var errLeaseShort = errors.New("worker: the lease renewed before the call ends within a heartbeat")

// leaseForCall makes sure a call starts inside its lease (doc.go, "The
// call-start mark"): with under a heartbeat left of the mark's lease
// (leaseUntil) or, unmarked (0), the claim's, it is renewed first. err means
// no call; fe is set when the refusal shows the task no longer stillOurs.
func (h *Handler) leaseForCall(ctx context.Context, t *ledger.Task, leaseUntil int64, log *slog.Logger) (fe *ledger.FencedError, err error) {
	lease := h.lease()
	inside := func(until int64) bool { return h.Ledger.Now().Add(lease/3).UnixMilli() < until }
	if leaseUntil == 0 {
		leaseUntil = t.LeaseUntil
	}
	if inside(leaseUntil) {
		return nil, nil
	}
	rt, err := h.Ledger.Renew(ctx, t.TaskID, t.AssignmentVersion, lease, ledger.WithAgeDeadline(t.DeadlineMs))
	if err == nil {
		// The lease runs from the renewal's send, not its answer: one answered
		// late (a lost reply recognised slowly) may leave it short or expired,
		// and a call started after its end could run beside the next attempt's.
		if rt != nil && inside(rt.LeaseUntil) {
			return nil, nil
		}
		log.WarnContext(ctx, "the lease renewed before the call was answered too late to cover it; provider not called")
		return nil, errLeaseShort
	}
	log.WarnContext(ctx, "the lease ran short before the call (since the claim or the call-start mark), and its renewal failed; provider not called", "error", err.Error())
	if errors.As(err, &fe) && !stillOurs(fe.Current, t.AssignmentVersion) {
		return fe, err
	}
	return nil, err
}
