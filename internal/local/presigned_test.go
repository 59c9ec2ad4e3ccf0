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

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/local"
)

// TestUploadProxyVerifiesThePresignedSignature: the local /s3 proxy
// re-verifies the SigV4 presigned signature with the stack's credentials
// (the emulators do not): a tampered signature, a body of another length
// (Content-Length is signed), an unsigned x-amz-* header, another upload
// key, and a copy of the URL without its query are refused 403/404 before
// anything reaches the emulator; the URL as issued is accepted.
func TestUploadProxyVerifiesThePresignedSignature(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{})
	doc := []byte("title,year\nledger,2026\n")
	sum := sha256.Sum256(doc)
	decl := fmt.Sprintf(`{"upload_id":"signed-1","sha256":"%s","size":%d,"content_type":"text/csv"}`, hex.EncodeToString(sum[:]), len(doc))
	resp, err := b.client.Post(b.st.URL+"/uploads", "application/json", strings.NewReader(decl))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /uploads = %d %s", resp.StatusCode, body)
	}
	var u api.UploadView
	if err := json.Unmarshal(body, &u); err != nil {
		t.Fatal(err)
	}
	put := func(url string, payload []byte, extra map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(payload))
		for k, v := range u.Headers {
			if http.CanonicalHeaderKey(k) != "Content-Length" {
				req.Header.Set(k, v)
			}
		}
		for k, v := range extra {
			req.Header.Set(k, v)
		}
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(msg)
	}
	i := strings.Index(u.URL, "X-Amz-Signature=")
	if i < 0 {
		t.Fatalf("no signature in %s", u.URL)
	}
	sig := u.URL[i+len("X-Amz-Signature="):]
	if j := strings.IndexByte(sig, '&'); j >= 0 {
		sig = sig[:j]
	}
	flipped := strings.Replace(u.URL, "X-Amz-Signature="+sig, "X-Amz-Signature="+strings.Repeat("0", len(sig)), 1)
	otherKey := strings.Replace(u.URL, "/signed-1?", "/signed-2?", 1)
	bare := u.URL[:strings.IndexByte(u.URL, '?')]
	for _, c := range []struct {
		name  string
		url   string
		body  []byte
		extra map[string]string
		want  int
	}{
		{"tampered signature", flipped, doc, nil, http.StatusForbidden},
		{"another length", u.URL, append(append([]byte(nil), doc...), '!'), nil, http.StatusForbidden},
		{"unsigned x-amz header", u.URL, doc, map[string]string{"X-Amz-Meta-Note": "hi"}, http.StatusForbidden},
		{"another upload key", otherKey, doc, nil, http.StatusForbidden},
		{"no query", bare, doc, nil, http.StatusForbidden},
	} {
		if code, msg := put(c.url, c.body, c.extra); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, msg, c.want)
		}
	}
	if code, msg := put(u.URL, doc, nil); code != http.StatusOK {
		t.Fatalf("the presigned PUT as issued: %d %s", code, msg)
	}
}
