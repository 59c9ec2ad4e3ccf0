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
// (internal/admission, DESIGN §13).
type Admission struct {
	// Admitter holds the shared windows (required).
	Admitter *admission.Admitter
	// Model is the model id the worker's provider calls.
	Model string
}

// Estimate is a call's token reservation: the most it can use (callMaximum),
// since only an upper bound makes a limit; settleAdmission corrects it by the
// reported usage. input is as the provider gets it (read when offloaded).
func (a *Admission) Estimate(input string, docs ...contract.DocumentSize) int64 {
	in, out := callMaximumOf(input, docs)
	return in + out
}

// admitCall asks for admission after the claim (doc.go, "Provider
// admission"). ok=false means no call, with r the record's result. Submit
// refuses a call admission can never admit (422): the park here is the
// backstop for limits lowered after a task was accepted.
func (h *Handler) admitCall(ctx context.Context, rec events.SQSMessage, t *ledger.Task, input string, log *slog.Logger) (*admission.Ticket, result, bool) {
	a := h.Admission
	if a == nil || t.Kind == deliver.Kind { // a destination uses none of the model's limits
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

// freshTicket admits the call again when its ticket's slot ended before the
// call could start (the writes between are repeated for seconds when
// throttled): counted in its admit's slot, a call sent later could meet,
// within 60 s at the provider, one admitted a minute after that slot. Not
// admitted now, the reservation is settled at nothing and the task waits.
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

// releaseTicket gives back an admission whose call will not be made. A
// failure keeps it counted.
func (h *Handler) releaseTicket(ctx context.Context, tk *admission.Ticket, log *slog.Logger) {
	if tk == nil {
		return
	}
	if err := h.Admission.Admitter.Release(ctx, tk); err != nil {
		log.WarnContext(ctx, "giving back the admission failed; the window keeps it", "error", err.Error())
	}
}

// waitUntil puts the task back until retryAt without consuming an attempt
// (ledger.WaitAdmission), delays the message as long and logs msg with
// attrs; what names the wait. A wait that could not be written still gives
// the task back.
func (h *Handler) waitUntil(ctx context.Context, rec events.SQSMessage, t *ledger.Task, retryAt time.Time, what, msg string, log *slog.Logger, attrs ...any) result {
	err := h.save(ctx, rec, t, "wait_admission", func(o ...ledger.WriteOption) (*ledger.Task, error) {
		return h.Ledger.WaitAdmission(ctx, t.TaskID, t.AssignmentVersion, retryAt, o...)
	}, log)
	var fe *ledger.FencedError
	switch {
	case errors.As(err, &fe):
		// After the mark (freshTicket) the lease may have lapsed: uncalled.
		if r := h.uncalledRefusal(ctx, rec, t, what+" wait", fe, log); !r.retry {
			return r
		}
	case err != nil:
		h.releaseUncalled(ctx, rec, t, what+" wait failed", log, "error", err.Error())
	}
	delay := max(retryAt.Sub(h.Ledger.Now()), time.Second)
	h.setVisibility(ctx, rec, delay, log)
	log.InfoContext(ctx, msg, append(attrs, "retry_at", retryAt.UTC().Format(time.RFC3339), "delay_ms", delay.Milliseconds())...)
	return notAdmitted
}

// settleAdmission corrects the window by a successful call's reported
// tokens; a failed call keeps its reservation (the provider may have
// counted it). A failure is logged, not retried.
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
