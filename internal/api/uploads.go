package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/payload"
)

// Document upload problems (POST /uploads and the documents of a submit;
// DESIGN §12).
const (
	// TypeUnsupportedDocument (415): the content type is not an accepted
	// document format (payload.Formats).
	TypeUnsupportedDocument = ProblemBase + "unsupported-document-type"
	// TypeDocumentTooLarge (413): the declared size is over the format's
	// limit.
	TypeDocumentTooLarge = ProblemBase + "document-too-large"
	// TypeUploadIDTaken (409): the caller presigned this upload id before
	// with another declaration (ids are per caller: another caller's use
	// of the same id is invisible and never in the way).
	TypeUploadIDTaken = ProblemBase + "upload-id-taken"
	// TypeUploadsNotConfigured (501): no payload bucket is configured.
	TypeUploadsNotConfigured = ProblemBase + "uploads-not-configured"
	// TypeUnknownUpload (422): this caller never presigned an upload with
	// this id (another caller's upload of the same id is not visible, so
	// an id's existence does not leak).
	TypeUnknownUpload = ProblemBase + "unknown-upload"
	// TypeUploadNotReceived (409): presigned, but the bytes have not been
	// PUT yet.
	TypeUploadNotReceived = ProblemBase + "upload-not-received"
	// TypeUploadMismatch (422): what was uploaded is not what was declared
	// (size, SHA-256 or content type).
	TypeUploadMismatch = ProblemBase + "upload-mismatch"
)

// UploadView is the 201 answer of POST /uploads: PUT the declared bytes to
// URL with Method and exactly Headers before ExpiresAt.
type UploadView struct {
	UploadID  string            `json:"upload_id"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	ExpiresAt string            `json:"expires_at"`
}

// uploadRequest is a validated POST /uploads body.
type uploadRequest struct {
	id, sha256, contentType string
	size                    int64
}

// presign serves POST /uploads: it validates the declaration, records it
// (payload.Store.PresignUpload: an upload id belongs to the first caller
// that declared it) and answers 201 with the presigned PUT.
func (h *Handler) presign(ctx context.Context, c *call) events.APIGatewayV2HTTPResponse {
	body, p := h.body(c)
	if p != nil {
		return h.reject(c, p)
	}
	u, p := parseUpload(c.headers, body)
	if p != nil {
		return h.reject(c, p)
	}
	if h.Payloads == nil {
		c.outcome = "uploads_not_configured"
		return h.reject(c, newProblem(TypeUploadsNotConfigured, http.StatusNotImplemented, "Uploads not configured",
			"This deployment has no payload bucket (PAYLOAD_BUCKET), so documents cannot be uploaded; nothing was recorded."))
	}
	if u.id == "" {
		u.id = newUploadID()
	}
	up, err := h.Payloads.PresignUpload(ctx, payload.UploadRequest{Scope: c.scope, UploadID: u.id, SHA256: u.sha256, Size: u.size, ContentType: u.contentType})
	switch {
	case errors.Is(err, payload.ErrForeignUpload), errors.Is(err, payload.ErrUploadConflict):
		c.outcome = "upload_id_taken"
		return h.reject(c, newProblem(TypeUploadIDTaken, http.StatusConflict, "Upload id taken",
			"This upload_id was already declared with another sha256, size or content type; nothing was recorded. Declare a new upload_id (or omit it to get one).").withField("upload_id"))
	case errors.Is(err, payload.ErrBadUpload):
		return h.reject(c, invalidBody("", "The upload declaration is not valid."))
	case err != nil:
		p := h.payloadProblem(ctx, c, "presign upload", err)
		if p.Status == http.StatusServiceUnavailable {
			// POST /uploads has no Idempotency-Key: the upload id is what
			// makes a retry land on the same declaration.
			p.Detail = "The payload store did not answer; nothing was recorded. Retrying is safe: send the same declaration with the same upload_id (a declaration without one gets a new id)."
		}
		return h.reject(c, p)
	}
	c.outcome = "presigned"
	v := UploadView{UploadID: up.UploadID, Method: up.Method, URL: up.URL, Headers: map[string]string{}, ExpiresAt: up.ExpiresAt.UTC().Format(time.RFC3339)}
	for k, vs := range up.Header {
		v.Headers[k] = strings.Join(vs, ",")
	}
	b, _ := json.Marshal(v)
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: string(b), Headers: map[string]string{
		"Content-Type":           "application/json",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	}}
}

// parseUpload validates {"upload_id"?, "sha256", "size", "content_type"}.
func parseUpload(h map[string]string, body []byte) (uploadRequest, *Problem) {
	var u uploadRequest
	if p := requireJSON(h); p != nil {
		return u, p
	}
	fields, p := parseObject(body, "upload_id", "sha256", "size", "content_type")
	if p != nil {
		return u, p
	}
	if raw, ok := fields["upload_id"]; ok {
		if json.Unmarshal(raw, &u.id) != nil || !validUploadID(u.id) {
			return u, invalidBody("upload_id", `Field "upload_id" must be 1-128 of [A-Za-z0-9_-], or absent (the server then chooses one).`)
		}
	}
	raw, ok := fields["content_type"]
	if !ok || json.Unmarshal(raw, &u.contentType) != nil {
		return u, invalidBody("content_type", `Field "content_type" is required: one of `+formatList()+".")
	}
	f, ok := payload.Formats[u.contentType]
	if !ok {
		return u, newProblem(TypeUnsupportedDocument, http.StatusUnsupportedMediaType, "Unsupported document type",
			fmt.Sprintf("Content type %q is not accepted; the accepted ones are %s.", clip(u.contentType, 80), formatList())).withField("content_type")
	}
	if raw, ok = fields["sha256"]; !ok || json.Unmarshal(raw, &u.sha256) != nil || !validSHA256(u.sha256) {
		return u, invalidBody("sha256", `Field "sha256" is required: the lowercase hex SHA-256 (64 digits) of the exact bytes to upload.`)
	}
	if raw, ok = fields["size"]; !ok || json.Unmarshal(raw, &u.size) != nil || u.size < 1 {
		return u, invalidBody("size", `Field "size" is required: the number of bytes to upload, a whole number of at least 1.`)
	}
	if u.size > f.MaxSize {
		return u, newProblem(TypeDocumentTooLarge, http.StatusRequestEntityTooLarge, "Document too large",
			fmt.Sprintf("A %s document may be at most %d bytes; %d were declared.", f.Name, f.MaxSize, u.size)).withField("size")
	}
	return u, nil
}

// formatList names the accepted content types, sorted.
func formatList() string {
	names := make([]string, 0, len(payload.Formats))
	for ct := range payload.Formats {
		names = append(names, ct)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func validUploadID(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// newUploadID is a fresh random upload id (128 bits).
func newUploadID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "up_" + hex.EncodeToString(b[:])
}
