package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ErrorClassDocumentUnavailable is the error class of a task failed because
// a document in the payload bucket is gone or not the bytes its reference
// names: answering without it, or from other bytes, answers another question.
const ErrorClassDocumentUnavailable = "document_unavailable"

// resolveDocuments reads and verifies the claimed task's documents, named
// neutrally "document-N". ok=false means no call, with r the result. The
// bytes count against the instance's document memory until done is called.
func (h *Handler) resolveDocuments(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) (docs []provider.Document, done func(), r result, ok bool) {
	if len(t.Documents) == 0 {
		return nil, func() {}, result{}, true
	}
	if h.Payloads == nil {
		log.ErrorContext(ctx, "the task references documents but the worker has no payload bucket configured (PAYLOAD_BUCKET)")
		return nil, nil, h.giveBackUncalled(ctx, rec, t, h.backoff(t, 0), "no payload bucket", log), false
	}
	done, fits := h.holdDocuments(t)
	if !fits {
		// Another instance, or this one a little later, takes the task.
		if !h.releaseUncalled(ctx, rec, t, "documents do not fit beside those this instance holds", log,
			"documents", len(t.Documents), "document_memory", h.documentMemory(), "retry_in_ms", DocumentMemoryRetry.Milliseconds()) {
			return nil, nil, deferred, false
		}
		h.setVisibility(ctx, rec, DocumentMemoryRetry, log)
		return nil, nil, notAdmitted, false
	}
	docs = make([]provider.Document, 0, len(t.Documents))
	for i, d := range t.Documents {
		b, err := h.Payloads.Get(ctx, payload.Ref(d.Ref))
		if err == nil {
			docs = append(docs, provider.Document{Name: fmt.Sprintf("document-%d", i+1), Format: d.Format, ContentType: d.ContentType, SHA256: d.Ref.SHA256, Bytes: b})
			continue
		}
		msg := fmt.Sprintf("document %d (upload %s, sha256 %s) could not be read from the payload bucket; the provider was not called: %s", i+1, d.UploadID, d.Ref.SHA256, err.Error())
		if errors.Is(err, payload.ErrIntegrity) {
			msg = fmt.Sprintf("document %d (upload %s) in the payload bucket does not match its reference (size or SHA-256 %s); the provider was not called: %s", i+1, d.UploadID, d.Ref.SHA256, err.Error())
		}
		r = h.unreadable(ctx, rec, t, err, "a document", ErrorClassDocumentUnavailable, msg, log, "document", i+1)
		done()
		return nil, nil, r, false
	}
	log.DebugContext(ctx, "documents read from the payload bucket", "documents", len(docs))
	return docs, done, result{}, true
}
