package local_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/local"
)

// TestStackServesUploads: on the local stack, POST /uploads answers a
// presigned URL on the stack's own origin (the same-origin proxy to the
// emulator, so the page needs no CORS); a PUT of the document there,
// then a submit naming it, completes with a reply that read the exact
// bytes. The proxy refuses anything but a PUT into the uploads prefix.
func TestStackServesUploads(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{})
	doc := []byte("name,score\nada,10\n")
	sum := sha256.Sum256(doc)
	digest := hex.EncodeToString(sum[:])

	do := func(method, url, ct string, body []byte, hdr map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, out
	}

	decl := fmt.Sprintf(`{"sha256":"%s","size":%d,"content_type":"text/csv"}`, digest, len(doc))
	resp, body := do(http.MethodPost, b.st.URL+"/uploads", "application/json", []byte(decl), nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /uploads = %d %s", resp.StatusCode, body)
	}
	var u api.UploadView
	if err := json.Unmarshal(body, &u); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u.URL, b.st.URL+local.UploadProxyPath+"/") {
		t.Fatalf("upload URL %s is not on the stack's origin %s", u.URL, b.st.URL)
	}
	hdr := map[string]string{}
	for k, v := range u.Headers {
		if http.CanonicalHeaderKey(k) != "Content-Length" {
			hdr[k] = v
		}
	}
	if resp, body := do(http.MethodPut, u.URL, "", doc, hdr); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT through the proxy = %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(http.MethodGet, u.URL, "", nil, nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET through the upload proxy = %d, want 405", resp.StatusCode)
	}
	if resp, _ := do(http.MethodPut, b.st.URL+local.UploadProxyPath+"/"+b.st.Names.PayloadBucket+"/inputs/x", "", doc, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("PUT outside uploads/ through the proxy = %d, want 404", resp.StatusCode)
	}

	sub := fmt.Sprintf(`{"kind":"generate","input":{"prompt":"rank them"},"documents":[{"upload_id":"%s"}]}`, u.UploadID)
	resp, body = do(http.MethodPost, b.st.URL+"/tasks", "application/json", []byte(sub), map[string]string{"Idempotency-Key": "local-doc-1"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /tasks = %d %s", resp.StatusCode, body)
	}
	var v taskView
	_ = json.Unmarshal(body, &v)
	done := b.awaitState(t, v.TaskID, "completed", 20*time.Second)
	want := fmt.Sprintf("[read document-1 csv sha256:%s bytes:%d]", digest, len(doc))
	if !strings.Contains(string(done.Result), want) {
		t.Fatalf("result %s lacks %q", done.Result, want)
	}
}
