package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// MaxDocuments is the most documents one generate task may reference.
const MaxDocuments = 5

// parseDocuments validates the optional "documents" member of a submit:
// [{"upload_id":"..."}], 1 to MaxDocuments distinct ids, generate tasks
// only. It returns the upload ids in order.
func parseDocuments(fields map[string]json.RawMessage, kind string) ([]string, *Problem) {
	raw, ok := fields["documents"]
	if !ok {
		return nil, nil
	}
	if kind != contract.KindGenerate {
		return nil, invalidBody("documents", `Field "documents" is accepted for generate tasks only.`)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil || len(list) < 1 || len(list) > MaxDocuments {
		return nil, invalidBody("documents", fmt.Sprintf(`Field "documents" must be an array of 1-%d objects {"upload_id": "..."}.`, MaxDocuments))
	}
	ids := make([]string, 0, len(list))
	for i, item := range list {
		field := "documents[" + strconv.Itoa(i) + "]"
		f, p := parseObject(item, "upload_id")
		if p != nil {
			p.Field = field
			return nil, p
		}
		var id string
		if r, ok := f["upload_id"]; !ok || json.Unmarshal(r, &id) != nil || !validUploadID(id) {
			return nil, invalidBody(field+".upload_id", `Each document needs "upload_id": the id POST /uploads returned (1-128 of [A-Za-z0-9_-]).`)
		}
		for _, seen := range ids {
			if seen == id {
				return nil, invalidBody(field+".upload_id", "The same upload_id is listed twice.")
			}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// resolveDocuments turns the submit's upload ids into the task's document
// references: each upload is checked against its declaration
// (payload.Store.Resolve: the caller's, received, same size, type and
// SHA-256); then check (when set) sees them all — a token budget that
// cannot cover them is refused before anything is written — and each is
// copied to its content address (Adopt) before the item that references
// it is written. A replay whose uploads have expired since (the uploads/
// prefix lives a day) takes the documents of the task already recorded
// under its key, when it named the same upload ids; Create then answers
// the replay or the 422 as for any submit.
func (h *Handler) resolveDocuments(ctx context.Context, c *call, key string, ids []string, check func([]ledger.DocumentRef) *Problem) ([]ledger.DocumentRef, *Problem) {
	if len(ids) == 0 {
		return nil, nil
	}
	if h.Payloads == nil {
		return nil, newProblem(TypeUploadsNotConfigured, http.StatusNotImplemented, "Uploads not configured",
			"This deployment has no payload bucket (PAYLOAD_BUCKET), so a task cannot reference documents; nothing was recorded.").withField("documents")
	}
	failed := func(i int, err error) ([]ledger.DocumentRef, *Problem) {
		p := h.uploadProblem(ctx, c, i, err)
		if p.Status != http.StatusServiceUnavailable && p.Status != http.StatusInternalServerError {
			if prior := h.priorDocuments(ctx, c, key, ids); prior != nil {
				return prior, nil
			}
		}
		return nil, p
	}
	docs := make([]ledger.DocumentRef, 0, len(ids))
	refs := make([]payload.Ref, 0, len(ids))
	for i, id := range ids {
		ref, f, err := h.Payloads.ResolveDocument(ctx, c.scope, id)
		if err != nil {
			return failed(i, err)
		}
		refs = append(refs, ref)
		docs = append(docs, ledger.DocumentRef{UploadID: id, Format: f.Name, ContentType: f.ContentType, Ref: *ledgerRef(ref)})
	}
	if check != nil {
		if p := check(docs); p != nil {
			return nil, p
		}
	}
	if c.recorded != nil {
		// Answered from the task recorded under the key (create): the hash
		// needs the documents' SHA-256, size and type, not their copies.
		return docs, nil
	}
	for i, ref := range refs {
		adopted, err := h.Payloads.Adopt(ctx, ref)
		if err != nil {
			return failed(i, err)
		}
		docs[i].Ref = *ledgerRef(adopted)
	}
	return docs, nil
}

// priorDocuments returns the documents of the caller's task under key when
// it named exactly ids (a replay), else nil.
func (h *Handler) priorDocuments(ctx context.Context, c *call, key string, ids []string) []ledger.DocumentRef {
	t, err := h.Ledger.Get(ctx, h.Ledger.TaskID(c.scope, key))
	if err != nil || t.Scope != c.scope || len(t.Documents) != len(ids) {
		return nil
	}
	for i, d := range t.Documents {
		if d.UploadID != ids[i] {
			return nil
		}
	}
	return t.Documents
}

// uploadProblem maps a Resolve or Adopt error of documents[i].
func (h *Handler) uploadProblem(ctx context.Context, c *call, i int, err error) *Problem {
	field := "documents[" + strconv.Itoa(i) + "].upload_id"
	switch {
	case errors.Is(err, payload.ErrUnknownUpload), errors.Is(err, payload.ErrForeignUpload), errors.Is(err, payload.ErrBadUpload):
		c.outcome = "unknown_upload"
		return newProblem(TypeUnknownUpload, http.StatusUnprocessableEntity, "Unknown upload",
			"No upload with this id is visible to the caller (declare one with POST /uploads); nothing was recorded.").withField(field)
	case errors.Is(err, payload.ErrNotUploaded):
		c.outcome = "upload_not_received"
		return newProblem(TypeUploadNotReceived, http.StatusConflict, "Upload not received",
			"This upload was declared but its bytes have not arrived; PUT them to the presigned URL first (or declare it again for a fresh URL). Nothing was recorded.").withField(field)
	case errors.Is(err, payload.ErrUploadMismatch):
		c.outcome = "upload_mismatch"
		return newProblem(TypeUploadMismatch, http.StatusUnprocessableEntity, "Upload does not match its declaration",
			"The uploaded bytes differ from the declaration (size, SHA-256 or content type); nothing was recorded. Declare a new upload for these bytes.").withField(field)
	}
	return h.payloadProblem(ctx, c, "resolve upload", err)
}

// withDocuments folds the documents' content (SHA-256, size, content type,
// in order) into a payload hash; without documents the hash is unchanged.
// Same key with another version of a document is therefore a 422.
func withDocuments(base string, docs []ledger.DocumentRef) string {
	if len(docs) == 0 {
		return base
	}
	var b bytes.Buffer
	b.WriteString(`{"documents":[`)
	for i, d := range docs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"content_type":`)
		b.Write(jsonString(d.ContentType))
		b.WriteString(`,"sha256":`)
		b.Write(jsonString(d.Ref.SHA256))
		b.WriteString(`,"size":` + strconv.FormatInt(d.Ref.Size, 10) + `}`)
	}
	b.WriteString(`],"payload_sha256":`)
	b.Write(jsonString(base))
	b.WriteByte('}')
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// DocumentView is one document of a task view (no bytes, no key).
type DocumentView struct {
	UploadID    string `json:"upload_id"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
}

func documentViews(docs []ledger.DocumentRef) []DocumentView {
	if len(docs) == 0 {
		return nil
	}
	out := make([]DocumentView, len(docs))
	for i, d := range docs {
		out[i] = DocumentView{UploadID: d.UploadID, SHA256: d.Ref.SHA256, Size: d.Ref.Size, ContentType: d.ContentType}
	}
	return out
}
