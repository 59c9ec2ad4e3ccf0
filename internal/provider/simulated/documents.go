package simulated

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/internal/provider/contract"
)

// documentNote is what the simulated reply says about the request's
// documents: for each, its name, format, and the SHA-256 and size of the
// bytes it was actually given (hashed here, not copied from the request),
// so a test can assert the provider saw the exact bytes. "" without
// documents.
func documentNote(docs []contract.Document) string {
	var b strings.Builder
	for _, d := range docs {
		sum := sha256.Sum256(d.Bytes)
		b.WriteString(" [read " + d.Name + " " + d.Format + " sha256:" + hex.EncodeToString(sum[:]) + " bytes:" + strconv.Itoa(len(d.Bytes)) + "]")
	}
	return b.String()
}

// AcceptsDocuments is true: the reply names each document it read.
const AcceptsDocuments = true
