package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// ErrorClassInputUnavailable is the error class of a task failed because its
// input in the payload bucket is gone or not the bytes its reference names;
// the provider is never sent other bytes than the submitted ones.
const ErrorClassInputUnavailable = "input_unavailable"

// resolveInput returns the claimed task's input: inline, or read from the
// payload bucket and verified. ok=false means no call, with r the result.
func (h *Handler) resolveInput(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) (input string, r result, ok bool) {
	if t.InputRef == nil {
		return t.Input, result{}, true
	}
	if h.Payloads == nil {
		log.ErrorContext(ctx, "the task's input is in the payload bucket but the worker has none configured (PAYLOAD_BUCKET)")
		return "", h.giveBackUncalled(ctx, rec, t, h.backoff(t, 0), "no payload bucket", log), false
	}
	b, err := h.Payloads.Get(ctx, payload.Ref(*t.InputRef))
	if err == nil {
		log.DebugContext(ctx, "input read from the payload bucket", "input_bytes", len(b))
		return string(b), result{}, true
	}
	msg := "the task's input could not be read from the payload bucket: " + err.Error()
	if errors.Is(err, payload.ErrIntegrity) {
		msg = "the task's input in the payload bucket does not match its reference (size or SHA-256); the provider was not called: " + err.Error()
	}
	return "", h.unreadable(ctx, rec, t, err, "the input", ErrorClassInputUnavailable, msg, log), false
}

// unreadable settles, without a call, a record whose input or a document
// (what) could not be read (doc.go, "Payloads in S3").
func (h *Handler) unreadable(ctx context.Context, rec events.SQSMessage, t *ledger.Task, err error, what, class, msg string, log *slog.Logger, attrs ...any) result {
	attrs = append(attrs, "error", err.Error())
	c := retrypolicy.DefaultClassifier(err)
	if c.Class == retrypolicy.Transient || c.Class == retrypolicy.UnknownOutcome {
		return h.giveBackUncalled(ctx, rec, t, h.backoff(t, c.RetryAfter), "payload bucket unavailable while reading "+what, log, attrs...)
	}
	if r, done := h.fail(ctx, rec, t, class, clip(msg, MaxErrorMessage), false, nil, log); done {
		return r
	}
	log.ErrorContext(ctx, "failed: "+what+" in the payload bucket is unusable; provider not called", attrs...)
	return ack(OutcomeFailed)
}

// backoff is t's wait before its next attempt: the Policy's, at least retryAfter.
func (h *Handler) backoff(t *ledger.Task, retryAfter time.Duration) time.Duration {
	now := h.Ledger.Now()
	return h.Policy.NextRetryAt(now, max(t.Attempts-1, 0), retryAfter).Sub(now)
}

// placeResult puts a result above the inline threshold in the payload
// bucket, repeated like a settling write (the put is idempotent), and keeps
// its reference (doc.go, "Payloads in S3"). Only a result that fits neither
// is an error (*ledger.ItemTooLargeError when over payload.MaxObjectSize too).
func (h *Handler) placeResult(ctx context.Context, t *ledger.Task, c ledger.Completion, log *slog.Logger) (ledger.Completion, error) {
	if h.Payloads == nil || h.Payloads.Inline(len(c.Result)) {
		return c, nil
	}
	body := []byte(c.Result)
	var v payload.Value
	put := func() (err error) {
		v, err = h.Payloads.PlaceResult(ctx, t.TaskID, t.CreatedMs, t.AssignmentVersion, body)
		return err
	}
	mayPass := func(err error) bool {
		cl := retrypolicy.DefaultClassifier(err).Class
		return err != nil && (cl == retrypolicy.Transient || cl == retrypolicy.UnknownOutcome) && ctx.Err() == nil
	}
	err := put()
	if mayPass(err) {
		err = h.repeat(ctx, "putting the result in the payload bucket failed; repeating", err, put, mayPass, log)
	}
	if err == nil {
		ref := ledger.PayloadRef(*v.Ref) // the same fields: a conversion
		c.ResultRef, c.Result = &ref, ""
		return c, nil
	}
	cerr := ledger.CheckCompletion(t, c)
	switch {
	case cerr == nil:
		log.WarnContext(ctx, "payload bucket unavailable; saving the result inline (it fits the item)", "result_bytes", len(body), "error", err.Error())
		return c, nil
	case errors.Is(err, payload.ErrTooLarge):
		return c, cerr // fits nowhere: the caller parks result_too_large
	}
	return c, err
}

// completionBytes is the size of a completion's result, inline or placed.
func completionBytes(c ledger.Completion) int {
	if c.ResultRef != nil {
		return int(c.ResultRef.Size)
	}
	return len(c.Result)
}
