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
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// ErrorClassDocumentUnavailable is the error class of a task failed
// because one of its documents, kept in the payload bucket, is gone or is
// not the bytes its reference names (size or SHA-256). The provider was not
// called: answering without the document, or from other bytes, would
// answer another question than the one submitted.
const ErrorClassDocumentUnavailable = "document_unavailable"

// resolveDocuments reads the claimed task's documents from the payload
// bucket, each verified against its reference (size and SHA-256), and
// returns them for the provider request, named neutrally "document-N".
// ok=false means the record is settled with r and the provider must not be
// called, as for the input (resolveInput): an unreadable or altered object
// fails the task document_unavailable, once, with the reason; S3 not
// answering gives the claim and its attempt back for a later retry. The
// documents' bytes count against the instance's document memory
// (docmemory.go) from before they are read until done is called; when
// they do not fit, the claim and its attempt are given back and the
// record tries again later.
func (h *Handler) resolveDocuments(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) (docs []provider.Document, done func(), r result, ok bool) {
	if len(t.Documents) == 0 {
		return nil, func() {}, result{}, true
	}
	if h.Payloads == nil {
		log.ErrorContext(ctx, "the task references documents but the worker has no payload bucket configured (PAYLOAD_BUCKET); released")
		return nil, nil, h.giveBack(ctx, rec, t, retrypolicy.Classification{Class: retrypolicy.Transient}, log), false
	}
	done, fits := h.holdDocuments(t)
	if !fits {
		return nil, nil, h.documentsDoNotFit(ctx, rec, t, log), false
	}
	docs, r, ok = h.readDocuments(ctx, rec, t, log)
	if !ok {
		done()
		return nil, nil, r, false
	}
	return docs, done, result{}, true
}

// readDocuments reads and verifies each document (see resolveDocuments).
func (h *Handler) readDocuments(ctx context.Context, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) (docs []provider.Document, r result, ok bool) {
	docs = make([]provider.Document, 0, len(t.Documents))
	for i, d := range t.Documents {
		b, err := h.Payloads.Get(ctx, payloadRef(d.Ref))
		if err == nil {
			docs = append(docs, provider.Document{Name: fmt.Sprintf("document-%d", i+1), Format: d.Format, ContentType: d.ContentType, SHA256: d.Ref.SHA256, Bytes: b})
			continue
		}
		c := retrypolicy.DefaultClassifier(err)
		if c.Class == retrypolicy.Transient || c.Class == retrypolicy.UnknownOutcome {
			log.WarnContext(ctx, "payload bucket unavailable while reading a document; released, provider not called", "document", i+1, "error", err.Error())
			return nil, h.giveBack(ctx, rec, t, c, log), false
		}
		msg := fmt.Sprintf("document %d (upload %s, sha256 %s) could not be read from the payload bucket; the provider was not called: %s", i+1, d.UploadID, d.Ref.SHA256, err.Error())
		if errors.Is(err, payload.ErrIntegrity) {
			msg = fmt.Sprintf("document %d (upload %s) in the payload bucket does not match its reference (size or SHA-256 %s); the provider was not called: %s", i+1, d.UploadID, d.Ref.SHA256, err.Error())
		}
		ferr := h.save(ctx, rec, t, "fail", func(o ...ledger.WriteOption) error {
			_, err := h.Ledger.Fail(ctx, t.TaskID, t.AssignmentVersion, ErrorClassDocumentUnavailable, clip(msg, MaxErrorMessage), h.withFailed(t, o)...)
			return err
		}, log)
		if r, done := h.settled(ctx, ferr, "fail", log); done {
			return nil, r, false
		}
		log.ErrorContext(ctx, "failed: a document in the payload bucket is unusable; provider not called", "document", i+1, "error", err.Error())
		return nil, ack(OutcomeFailed), false
	}
	log.DebugContext(ctx, "documents read from the payload bucket", "documents", len(docs))
	return docs, result{}, true
}
