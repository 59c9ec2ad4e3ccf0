package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// MaxViewResult is the largest offloaded result a task view carries
// inline: 4 MiB, well inside Lambda's 6 MB response limit. A larger one
// (up to payload.MaxObjectSize) is described by the receipt's
// result_bytes and result_sha256 only.
const MaxViewResult = 4 << 20

// placeInput puts an input above the inline threshold in the payload
// bucket (content-addressed, before the item that references it) and has
// n keep the reference instead. The payload hash was computed over the
// canonical input already, so replays still dedupe or 422. Small inputs
// (and a Handler without Payloads) make no S3 call.
func (h *Handler) placeInput(ctx context.Context, c *call, n *ledger.NewTask) *Problem {
	if h.Payloads == nil || h.Payloads.Inline(len(n.Input)) {
		return nil
	}
	v, err := h.Payloads.PlaceInput(ctx, []byte(n.Input))
	if err != nil {
		return h.payloadProblem(ctx, c, "put input", err)
	}
	if v.Ref != nil {
		n.InputRef, n.Input = ledgerRef(*v.Ref), ""
	}
	return nil
}

// inputOf returns a task's input: inline, or read from the payload bucket.
func (h *Handler) inputOf(ctx context.Context, c *call, t *ledger.Task) (string, *Problem) {
	if t.InputRef == nil {
		return t.Input, nil
	}
	if h.Payloads == nil {
		h.log().ErrorContext(ctx, "api: task input is in S3 but no payload bucket is configured (PAYLOAD_BUCKET)", "task_id", t.TaskID)
		return "", internalError()
	}
	b, err := h.Payloads.Get(ctx, payloadRef(*t.InputRef))
	if err != nil {
		return "", h.payloadProblem(ctx, c, "get input", err)
	}
	return string(b), nil
}

// resolveResult fills v.Result (and the receipt's result_bytes and
// result_sha256) from a completed task's offloaded result.
func (h *Handler) resolveResult(ctx context.Context, c *call, t *ledger.Task, v *TaskView) *Problem {
	if !showsResult(t) || t.ResultRef == nil || t.Result != "" {
		return nil // (an edited approval's result is inline; the generated one stays in S3)
	}
	v.Receipt.ResultBytes, v.Receipt.ResultSHA256 = t.ResultRef.Size, t.ResultRef.SHA256
	if t.ResultRef.Size > MaxViewResult {
		return nil
	}
	b, p := h.offloadedResult(ctx, c, t)
	if p != nil {
		return p
	}
	if json.Valid(b) {
		v.Result = json.RawMessage(b)
	} else {
		v.Result, _ = json.Marshal(string(b))
	}
	return nil
}

// offloadedResult reads t's result from the payload bucket (its size and
// SHA-256 verified against t.ResultRef, which must be set).
func (h *Handler) offloadedResult(ctx context.Context, c *call, t *ledger.Task) ([]byte, *Problem) {
	if h.Payloads == nil {
		h.log().ErrorContext(ctx, "api: task result is in S3 but no payload bucket is configured (PAYLOAD_BUCKET)", "task_id", t.TaskID)
		return nil, internalError()
	}
	b, err := h.Payloads.Get(ctx, payloadRef(*t.ResultRef))
	if err != nil {
		return nil, h.payloadProblem(ctx, c, "get result", err)
	}
	return b, nil
}

// payloadProblem maps a payload store error: transient S3 trouble is a 503
// (retrying is safe: every write is idempotent), anything else a 500 with
// the cause logged (keys carry ids and hashes only).
func (h *Handler) payloadProblem(ctx context.Context, c *call, op string, err error) *Problem {
	cl := retrypolicy.DefaultClassifier(err)
	if cl.Class == retrypolicy.Transient || cl.Class == retrypolicy.UnknownOutcome {
		c.outcome = "payload_unavailable"
		h.log().WarnContext(ctx, "api: payload store unavailable", "op", op, "task_id", c.taskID, "error", err.Error())
		after := max(cl.RetryAfter, time.Second)
		p := throttled(after)
		p.Type, p.Title = TypeUnavailable, "Service unavailable"
		p.Detail = "The payload store did not answer; nothing was recorded. Retrying with the same Idempotency-Key is safe."
		p.Status = http.StatusServiceUnavailable
		return p
	}
	c.outcome = "error"
	h.log().ErrorContext(ctx, "api: payload store error", "op", op, "task_id", c.taskID, "error", err.Error())
	return internalError()
}

func ledgerRef(r payload.Ref) *ledger.PayloadRef {
	return &ledger.PayloadRef{Bucket: r.Bucket, Key: r.Key, SHA256: r.SHA256, Size: r.Size}
}

func payloadRef(r ledger.PayloadRef) payload.Ref {
	return payload.Ref{Bucket: r.Bucket, Key: r.Key, SHA256: r.SHA256, Size: r.Size}
}
