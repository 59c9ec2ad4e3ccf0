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

// Estimate is a call's token reservation: the most the call can use,
// contract.CallMaximumWith — one token per byte of the prompt and system
// prompt plus contract.InputOverheadTokens, each document's
// contract.DocumentTokens, and its max_tokens (or contract.MaxTokensLimit
// when the input sets none), the same bound the budget reserves. A smaller
// estimate (bytes/4, a default max_tokens) let one admitted call exceed
// the per-minute token limit on its own when the provider counted more
// tokens than guessed (adversarial review of issue 14): an estimate is
// only a limit if it is an upper bound. Settle corrects the window by the
// provider's reported usage afterwards. input is the input as the provider
// gets it (read from the payload bucket when offloaded).
func (a *Admission) Estimate(input string, docs ...contract.DocumentSize) int64 {
	in, err := contract.ParseGenerateInput(json.RawMessage(input))
	if err != nil { // the call will be refused as invalid input; reserve by size
		i, _ := contract.CallMaximumWith(contract.GenerateInput{}, docs)
		return int64(len(input)) + i + contract.MaxTokensLimit
	}
	i, o := contract.CallMaximumWith(in, docs)
	return i + o
}

// admitCall asks for admission right before the provider call (after the
// claim). ok=false means the provider must not be called and r is the
// record's result:
//   - no room in the last 60 s (*admission.NotAdmittedError): the task
//     goes back to retry_wait until RetryAt, the earliest slot at which the
//     call fits (ledger.WaitAdmission, the attempt given back), and the
//     message's visibility is set to the same time, so no copy of it is
//     claimed before then;
//   - admission can never admit the call (unknown model, estimate above the
//     per-minute token limit): parked provider_config (review.AdmissionRefused)
//     — the submit function refuses such a task up front (api, 422
//     exceeds-admission-limit), so this is the backstop for limits lowered
//     after a task was accepted;
//   - DynamoDB failed: released (no call made, attempt given back) and the
//     message comes back.
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
		return nil, h.waitAdmission(ctx, rec, t, na.RetryAt, log), false
	case errors.As(err, &um), errors.As(err, &tl):
		log.ErrorContext(ctx, "admission can never admit this call; parking", "model", a.Model, "estimated_tokens", est, "error", err.Error())
		return nil, h.parkUncalled(ctx, t, ledger.ParkOptions{State: ledger.StateRunning, Version: t.AssignmentVersion},
			review.AdmissionRefused(t, a.Model, err.Error()), log), false
	}
	if rerr := h.release(ctx, rec, t, log); rerr != nil {
		log.ErrorContext(ctx, "admission failed and the release failed; provider not called, the lease will expire",
			"error", err.Error(), "release_error", rerr.Error())
	} else {
		log.WarnContext(ctx, "admission failed; released the task and its attempt, provider not called", "error", err.Error())
	}
	return nil, deferred, false
}

// freshTicket admits the call again when its ticket's slot ended before
// the call could start (the budget reservation and the call-start mark
// came between, and a throttled write is repeated for seconds): a call is
// counted in its admit's slot, so one sent later could meet, within 60 s
// at the provider, a call admitted a minute after that slot (adversarial
// review of issue 14). The old ticket is given back first (its call was
// never made; a lost reply keeps it counted, the safe side). When the
// call is not admitted now, the
// budget reservation is settled at zero (no call) and the task waits as
// usual, its attempt given back.
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

// waitAdmission puts the task back until retryAt without consuming an
// attempt, and delays the message to the same time.
func (h *Handler) waitAdmission(ctx context.Context, rec events.SQSMessage, t *ledger.Task, retryAt time.Time, log *slog.Logger) result {
	r, delay, waited := h.waitUntil(ctx, rec, t, retryAt, "admission", log)
	if waited {
		log.InfoContext(ctx, "not admitted: the model's window is full; waiting without consuming an attempt",
			"model", h.Admission.Model, "retry_at", retryAt.UTC().Format(time.RFC3339), "delay_ms", delay.Milliseconds())
	}
	return r
}

// waitUntil puts the task back until retryAt without consuming an attempt
// (ledger.WaitAdmission: retry_wait, not_before = retryAt), and delays the
// message to the same time; what names the wait in logs ("admission",
// "daily quota"). waited=false when the task is someone else's now (r says
// so); a wait that could not be written still gives the task back.
func (h *Handler) waitUntil(ctx context.Context, rec events.SQSMessage, t *ledger.Task, retryAt time.Time, what string, log *slog.Logger) (r result, delay time.Duration, waited bool) {
	err := h.save(ctx, rec, t, "wait_admission", func(o ...ledger.WriteOption) error {
		_, err := h.Ledger.WaitAdmission(ctx, t.TaskID, t.AssignmentVersion, retryAt, o...)
		return err
	}, log)
	var fe *ledger.FencedError
	switch {
	case errors.As(err, &fe):
		// After the call-start mark (a re-admission, freshTicket) the lease
		// may have expired to unknown at this assignment: no call was made,
		// the task is given back (uncalled) and the message waits.
		d, uerr := h.uncalled(ctx, rec, t, fe.Current, log)
		if !d.givesBack() {
			if d == sendNothing {
				log.WarnContext(ctx, what+" wait rejected: the assignment was fenced; provider not called", "why", fe.Why, "current_version", currentVersion(fe))
			}
			return ack(OutcomeFenced), 0, false
		}
		if uerr != nil {
			log.ErrorContext(ctx, what+" wait refused by the lease's expiry and the release failed; provider not called", "release_error", uerr.Error())
		}
	case err != nil:
		// Give the assignment back anyway (no call was made): queued, and
		// the next claim asks again.
		if rerr := h.release(ctx, rec, t, log); rerr != nil {
			log.ErrorContext(ctx, what+" wait and release failed; provider not called, the lease will expire", "error", err.Error(), "release_error", rerr.Error())
		}
	}
	delay = max(retryAt.Sub(h.Ledger.Now()), time.Second)
	h.setVisibility(ctx, rec, delay, log)
	return notAdmitted, delay, true
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
