package bedrock_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestConverseDocuments: a request's documents go to Converse as content
// blocks before the prompt, on the wire as the real SDK serialises them —
// document blocks (name, format, base64 bytes) for document formats, image
// blocks for png and jpeg; an unknown format is refused permanently and
// nothing is sent.
func TestConverseDocuments(t *testing.T) {
	t.Parallel()
	type block struct {
		Text     string
		Document *struct {
			Name, Format string
			Source       struct{ Bytes string }
		}
		Image *struct {
			Format string
			Source struct{ Bytes string }
		}
	}
	var got struct {
		Messages []struct{ Content []block }
	}
	calls := 0
	p := setup(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		respond(w, 200, "", okBody)
	})
	pdf := []byte("%PDF-1.7 figures")
	png := []byte("\x89PNG\r\n\x1a\n pixels")
	r := req("task-docs")
	r.Documents = []contract.Document{
		{Name: "document-1", Format: "pdf", ContentType: "application/pdf", Bytes: pdf},
		{Name: "document-2", Format: "png", ContentType: "image/png", Bytes: png},
	}
	if _, err := p.Generate(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || len(got.Messages[0].Content) != 3 {
		t.Fatalf("content blocks %+v", got.Messages)
	}
	c := got.Messages[0].Content
	decode := func(s string) []byte { b, _ := base64.StdEncoding.DecodeString(s); return b }
	if d := c[0].Document; d == nil || d.Name != "document-1" || d.Format != "pdf" || !bytes.Equal(decode(d.Source.Bytes), pdf) {
		t.Errorf("document block %+v", c[0])
	}
	if im := c[1].Image; im == nil || im.Format != "png" || !bytes.Equal(decode(im.Source.Bytes), png) {
		t.Errorf("image block %+v", c[1])
	}
	if c[2].Text != "Summarise the ledger" {
		t.Errorf("the prompt does not follow the documents: %+v", c[2])
	}

	r.Documents = []contract.Document{{Name: "document-1", Format: "zip", Bytes: pdf}}
	_, err := p.Generate(t.Context(), r)
	if cl := retrypolicy.DefaultClassifier(err).Class; cl != retrypolicy.PermanentInput || calls != 1 {
		t.Fatalf("unknown format: %v (class %v), %d call(s); want a permanent refusal before sending", err, cl, calls)
	}
}
