package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TypeDocumentExpired (409): a regenerate inherits its parent's documents,
// but one of them is no longer in the payload bucket (the lifecycle deletes
// inputs/ a retention window after the last task that wrote or renewed
// them) or is not the bytes the parent referenced. Nothing was written.
const TypeDocumentExpired = ProblemBase + "document-expired"

// renewInherited checks and renews each document a regenerate inherits
// from its parent (payload.Store.Renew: inputs/<sha256> copied onto
// itself), so the new task's documents live a full retention window from
// now, and a document already gone is refused before anything is written
// instead of failing the task document_unavailable in the worker. A
// regenerate already recorded under this key (a replay after the document
// expired) is let through: Create answers it (200 or 422) as for any
// submit.
func (h *Handler) renewInherited(ctx context.Context, c *call, key string, docs []ledger.DocumentRef) *Problem {
	if len(docs) == 0 {
		return nil
	}
	if h.Payloads == nil {
		return newProblem(TypeUploadsNotConfigured, http.StatusNotImplemented, "Uploads not configured",
			"The parent task references documents, but this deployment has no payload bucket (PAYLOAD_BUCKET); nothing was recorded.")
	}
	for i, d := range docs {
		err := h.Payloads.Renew(ctx, payloadRef(d.Ref))
		if err == nil {
			continue
		}
		if !errors.Is(err, payload.ErrNotFound) && !errors.Is(err, payload.ErrIntegrity) {
			return h.payloadProblem(ctx, c, "renew document", err)
		}
		if recorded, _ := h.recorded(ctx, c, key); recorded {
			return nil
		}
		c.outcome = "document_expired"
		return newProblem(TypeDocumentExpired, http.StatusConflict, "Document expired",
			fmt.Sprintf("Document %d of the parent task (upload %s, sha256 %s) is no longer stored; nothing was recorded. Upload it again and submit a new task that names it.",
				i+1, d.UploadID, d.Ref.SHA256)).withField("documents[" + strconv.Itoa(i) + "]")
	}
	return nil
}
