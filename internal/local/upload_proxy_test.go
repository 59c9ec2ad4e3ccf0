package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/payload"
)

// TestUploadProxyIsNoDoorToOtherKeys: the emulator behind the local
// stack's /s3 proxy verifies no signature, so the proxy itself must refuse
// (1) a PUT with no presigned signature — else anyone on the machine could
// write any caller's uploads/<scope_hash>/<id> (the scope hash is an
// unsalted hash of the caller's subject); and (2) a PUT carrying
// x-amz-copy-source — else it is forwarded as a CopyObject and reads ANY
// key of the bucket (here another task's document at inputs/<sha256>,
// whose hash and size are all a caller needs: the simulated reply, the
// task view and the logs print them) into the caller's own upload, which
// its submit then hands to the provider. The proxy forwards only a
// presigned URL for exactly this path, with no x-amz-* header the presign
// did not sign.
func TestUploadProxyIsNoDoorToOtherKeys(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{})
	ctx := context.Background()
	bucket := b.st.Names.PayloadBucket
	s3c := awsclient.S3(b.st.AWS)

	// Another task's adopted document, content-addressed.
	secret := []byte("name,salary\nada,250000\ngrace,260000\n")
	secretRef := payload.Ref{Bucket: bucket, Key: payload.InputKey(payload.Digest(secret)), SHA256: payload.Digest(secret), Size: int64(len(secret))}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(secretRef.Key), Body: bytes.NewReader(secret)}); err != nil {
		t.Fatal(err)
	}

	send := func(method, u string, body []byte, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return resp.StatusCode, string(out)
	}

	// (1) An unsigned PUT to some caller's upload key.
	victimKey := payload.UploadKey("some-other-caller", "their-upload")
	if code, _ := send(http.MethodPut, b.st.URL+local.UploadProxyPath+"/"+bucket+"/"+victimKey, []byte("overwritten"), map[string]string{"Content-Type": "application/pdf"}); code == http.StatusOK {
		t.Errorf("the upload proxy forwarded a PUT with no presigned signature to %s (200)", victimKey)
	}

	// (2) Declare an upload with the other document's hash and size, then
	// PUT to the presigned URL with x-amz-copy-source instead of the bytes.
	decl := fmt.Sprintf(`{"upload_id":"borrowed","sha256":"%s","size":%d,"content_type":"text/csv"}`, secretRef.SHA256, secretRef.Size)
	code, body := send(http.MethodPost, b.st.URL+"/uploads", []byte(decl), map[string]string{"Content-Type": "application/json"})
	if code != http.StatusCreated {
		t.Fatalf("POST /uploads = %d %s", code, body)
	}
	var u api.UploadView
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	code, body = send(http.MethodPut, u.URL, nil, map[string]string{
		"X-Amz-Copy-Source":        "/" + bucket + "/" + url.PathEscape(secretRef.Key),
		"X-Amz-Metadata-Directive": "REPLACE",
		"Content-Type":             "text/csv",
	})
	if code == http.StatusOK {
		t.Errorf("the upload proxy forwarded a PUT with x-amz-copy-source (a CopyObject from %s): %d %s", secretRef.Key, code, clipS(body))
	}
	sub := `{"kind":"generate","input":{"prompt":"what is in it?"},"documents":[{"upload_id":"borrowed"}]}`
	code, body = send(http.MethodPost, b.st.URL+"/tasks", []byte(sub), map[string]string{"Content-Type": "application/json", "Idempotency-Key": "borrowed-1"})
	if code != http.StatusAccepted {
		return // refused: the document was not obtained
	}
	var v taskView
	_ = json.Unmarshal([]byte(body), &v)
	done := b.awaitState(t, v.TaskID, "completed", 20*time.Second)
	if strings.Contains(string(done.Result), "sha256:"+secretRef.SHA256) {
		t.Errorf("a caller that never had the bytes got another task's document handed to the provider: %s", clipS(string(done.Result)))
	}
}

func clipS(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}
