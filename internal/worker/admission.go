package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Admission gates the worker's provider calls on shared per-model limits
// (internal/admission, DESIGN §13). A nil *Admission in Handler.Admission
// means no admission: no call to it at all.
type Admission struct {
	// Admitter holds the shared windows (required).
	Admitter *admission.Admitter
	// Model is the model id the worker's provider calls.
	Model string
}

// Estimate is a call's token reservation: the most the call can use
// (callMaximum, the bound the budget reserves), since an estimate is only
// a limit if it is an upper bound. Settle corrects the window by the
// provider's reported usage afterwards. input is the input as the provider
// gets it (read from the payload bucket when offloaded).
func (a *Admission) Estimate(input string, docs ...contract.DocumentSize) int64 {
	in, out := callMaximumOf(input, docs)
	return in + out
}

// admitCall asks for admission after the claim (doc.go, "Provider
// admission"). ok=false means the provider must not be called and r is the
// record's result. A call admission can never admit is refused up front by
// the submit function (422 exceeds-admission-limit): the park here is the
// backstop for limits lowered after a task was accepted.
func (h *Handler) admitCall(ctx context.Context, rec events.SQSMessage, t *ledger.Task, input string, log *slog.Logger) (*admission.Ticket, result, bool) {
	a := h.Admission
	if a == nil || t.Kind == deliver.Kind {
		// A deliver task calls its destination, not the provider: it uses
		// none of the model's limits.
		return nil, result{}, true
	}
	est := a.Estimate(input, documentSizes(t.Documents)...)
	tk, err := a.Admitter.Admit(ctx, a.Model, est)
	if err == nil {
		log.DebugContext(ctx, "admitted", "model", a.Model, "estimated_tokens", est, "admission_writes", tk.Writes)
		return tk, result{}, true
	}
	var na *admission.NotAdmittedError
	var um *admission.UnknownModelError
	var tl *admission.EstimateTooLargeError
	switch {
	case errors.As(err, &na):
		return nil, h.waitUntil(ctx, rec, t, na.RetryAt, "admission", "not admitted: the model's window is full; waiting without consuming an attempt",
			log, "model", a.Model), false
	case errors.As(err, &um), errors.As(err, &tl):
		log.ErrorContext(ctx, "admission can never admit this call; parking", "model", a.Model, "estimated_tokens", est, "error", err.Error())
		return nil, h.parkUncalled(ctx, t, review.AdmissionRefused(t, a.Model, err.Error()), log), false
	}
	return nil, h.giveBackUncalled(ctx, rec, t, 0, "admission failed", log, "error", err.Error()), false
}

// freshTicket admits the call again when its ticket's slot ended before
// the call could start (the reservation and the call-start mark came
// between, and a throttled write is repeated for seconds): a call is
// counted in its admit's slot, so one sent later could meet, within 60 s
// at the provider, a call admitted a minute after that slot. The old
// ticket is given back first; when the call is not admitted now, the
// reservation is settled at nothing and the task waits as usual.
func (h *Handler) freshTicket(ctx context.Context, rec events.SQSMessage, t *ledger.Task, input string, tk *admission.Ticket, rs *reservation, log *slog.Logger) (*admission.Ticket, result, bool) {
	if tk == nil || h.Ledger.Now().Before(tk.ValidUntil) {
		return tk, result{}, true
	}
	log.WarnContext(ctx, "the admission slot ended before the call could start; admitting again",
		"slot_end", tk.ValidUntil.UTC().Format(time.RFC3339Nano))
	h.releaseTicket(ctx, tk, log)
	fresh, r, ok := h.admitCall(ctx, rec, t, input, log)
	if !ok {
		h.settle(ctx, t, input, rs, attempt{err: errNoCall}, log)
		return nil, r, false
	}
	return fresh, result{}, true
}

// releaseTicket gives back an admission whose call will not be made (the
// budget parked the task, the call-start mark was refused), so it does not
// hold the model's capacity for nothing. A failure keeps it counted.
func (h *Handler) releaseTicket(ctx context.Context, tk *admission.Ticket, log *slog.Logger) {
	if tk == nil {
		return
	}
	if err := h.Admission.Admitter.Release(ctx, tk); err != nil {
		log.WarnContext(ctx, "giving back the admission failed; the window keeps it", "error", err.Error())
	}
}

// waitUntil puts the task back until retryAt without consuming an attempt
// (ledger.WaitAdmission: retry_wait, not_before = retryAt), delays the
// message to the same time and logs msg with attrs; what names the wait
// ("admission", "daily quota"). A wait that could not be written still
// gives the task back; nothing is logged when the task is someone else's.
func (h *Handler) waitUntil(ctx context.Context, rec events.SQSMessage, t *ledger.Task, retryAt time.Time, what, msg string, log *slog.Logger, attrs ...any) result {
	err := h.save(ctx, rec, t, "wait_admission", func(o ...ledger.WriteOption) (*ledger.Task, error) {
		return h.Ledger.WaitAdmission(ctx, t.TaskID, t.AssignmentVersion, retryAt, o...)
	}, log)
	var fe *ledger.FencedError
	switch {
	case errors.As(err, &fe):
		// After the call-start mark (a re-admission, freshTicket) the lease
		// may have expired to unknown at this assignment: no call was made,
		// the task is given back (uncalled) and the message waits.
		if r := h.uncalledRefusal(ctx, rec, t, what+" wait", fe, log); !r.retry {
			return r
		}
	case err != nil:
		// Give the assignment back anyway (no call was made): queued, and
		// the next claim asks again.
		h.releaseUncalled(ctx, rec, t, what+" wait failed", log, "error", err.Error())
	}
	delay := max(retryAt.Sub(h.Ledger.Now()), time.Second)
	h.setVisibility(ctx, rec, delay, log)
	log.InfoContext(ctx, msg, append(attrs, "retry_at", retryAt.UTC().Format(time.RFC3339), "delay_ms", delay.Milliseconds())...)
	return notAdmitted
}

// settleAdmission corrects the window by the tokens the provider reported
// for a successful call. A failed call keeps its reservation (the safe
// side: the provider may have counted it). Settle is one UpdateItem, none
// when usage equals the estimate; its failure is logged, not retried.
func (h *Handler) settleAdmission(ctx context.Context, tk *admission.Ticket, a attempt, log *slog.Logger) {
	if tk == nil || a.err != nil {
		return
	}
	var out contract.GenerateOutput
	if err := json.Unmarshal(a.res.Output, &out); err != nil {
		return
	}
	used := int64(out.Usage.InputTokens + out.Usage.OutputTokens)
	if used <= 0 {
		return
	}
	if err := h.Admission.Admitter.Settle(ctx, tk, used); err != nil {
		log.WarnContext(ctx, "admission settle failed; the window keeps the estimate", "error", err.Error(),
			"estimated_tokens", tk.EstimatedTokens, "used_tokens", used)
	}
}
