package soak

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
)

// Documents through the presigned upload flow (DESIGN §12, README
// "Documents"): POST /uploads to the submit handler, a PUT of the bytes to
// the presigned URL with net/http (as a browser does: the emulator serves
// it, no SDK in between), then a submit naming the upload. The soak's
// document kinds and the bench's 1 MB document row both use these.

// DocumentType is the content type of the soak's and the bench's documents.
const DocumentType = "text/plain"

// Presigned is the answer of POST /uploads: the status, the problem type
// of a refusal, and the presigned PUT of a 201.
type Presigned struct {
	Status  int
	Problem string
	View    api.UploadView
}

// PresignDocument calls POST /uploads on h declaring uploadID ("" lets the
// server choose), the SHA-256 and size of doc, and contentType.
func PresignDocument(ctx context.Context, h *api.Handler, uploadID, contentType string, doc []byte) (Presigned, error) {
	sum := sha256.Sum256(doc)
	m := map[string]any{"sha256": hex.EncodeToString(sum[:]), "size": len(doc), "content_type": contentType}
	if uploadID != "" {
		m["upload_id"] = uploadID
	}
	body, _ := json.Marshal(m)
	resp, err := h.Handle(ctx, apiRequest(http.MethodPost, "/uploads", "", string(body)))
	if err != nil {
		return Presigned{}, err
	}
	p := Presigned{Status: resp.StatusCode, Problem: problemType(resp)}
	if resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal([]byte(resp.Body), &p.View); err != nil {
			return p, fmt.Errorf("soak: POST /uploads answered 201 with an unreadable body: %w", err)
		}
	}
	return p, nil
}

// PutDocument sends body to a presigned upload with exactly its headers
// (Content-Length is the body's, set by net/http).
func PutDocument(ctx context.Context, v api.UploadView, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, v.Method, v.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, val := range v.Headers {
		if http.CanonicalHeaderKey(k) != "Content-Length" {
			req.Header.Set(k, val)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("soak: PUT to the presigned URL: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("soak: PUT to the presigned URL answered %d: %.200s", resp.StatusCode, msg)
	}
	return nil
}

// DocumentSubmit is the body of a generate submit with input and the
// named uploads.
func DocumentSubmit(input string, uploadIDs ...string) string {
	docs := make([]map[string]string, len(uploadIDs))
	for i, id := range uploadIDs {
		docs[i] = map[string]string{"upload_id": id}
	}
	d, _ := json.Marshal(docs)
	return `{"kind":"generate","input":` + input + `,"documents":` + string(d) + `}`
}

// problemType is the "type" of a problem+json answer ("" otherwise).
func problemType(resp events.APIGatewayV2HTTPResponse) string {
	if resp.StatusCode < 400 {
		return ""
	}
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(resp.Body), &p)
	return p.Type
}

// documentBytes is the deterministic text document of soak task i,
// version v (another version has other bytes): 2-8 KiB, so the bytes are
// well above the inline threshold yet the soak stays quick.
func documentBytes(i, v int) []byte {
	n := 2048 + (i*997)%6144
	var b bytes.Buffer
	b.WriteString("soak document " + strconv.Itoa(i) + " version " + strconv.Itoa(v) + "\n")
	for b.Len() < n {
		b.WriteString("a line of the document under review, " + strconv.Itoa(b.Len()) + "\n")
	}
	return b.Bytes()[:n]
}
