package openai_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/openai"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestDocumentsRefused: a request with documents is refused with the
// typed permanent error, and nothing is sent (the documents are never
// silently dropped).
func TestDocumentsRefused(t *testing.T) {
	t.Parallel()
	calls := 0
	b := setup(t, func(w http.ResponseWriter, r *http.Request) { calls++ })
	r := req("task-docs")
	r.Documents = []contract.Document{{Name: "document-1", Format: "pdf", Bytes: []byte("%PDF")}}
	_, err := b.p.Generate(t.Context(), r)
	if !errors.Is(err, openai.ErrDocumentsUnsupported) || retrypolicy.DefaultClassifier(err).Class != retrypolicy.PermanentInput || calls != 0 {
		t.Fatalf("err %v (class %v), %d call(s); want ErrDocumentsUnsupported, permanent, no call", err, retrypolicy.DefaultClassifier(err).Class, calls)
	}
}
