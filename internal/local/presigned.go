package local

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// uploadPath is the only key the proxy writes: uploads/<scope_hash>/<id>
// (payload.UploadKey).
var uploadPath = regexp.MustCompile(`^uploads/[0-9a-f]{32}/[A-Za-z0-9_-]{1,128}$`)

// presignQuery are the query parameters of a SigV4 presigned URL.
var presignQuery = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"}

// errNotPresigned is wrapped by every reason checkPresigned refuses.
var errNotPresigned = errors.New("not a presigned upload")

// checkPresigned verifies what S3 would and the emulators do not: the
// request is a PUT presigned (SigV4, query form) by the stack's own
// credentials for exactly this path, not expired, carrying every header it
// signed and no x-amz-* header it did not sign (so no x-amz-copy-source:
// the proxy never turns into a CopyObject that reads another key).
func checkPresigned(ctx context.Context, r *http.Request, key string, creds aws.CredentialsProvider, region string, now time.Time) error {
	if !uploadPath.MatchString(key) {
		return fmt.Errorf("%w: %q is not uploads/<scope_hash>/<upload_id>", errNotPresigned, key)
	}
	q := r.URL.Query()
	for _, p := range presignQuery {
		if len(q[p]) != 1 || q.Get(p) == "" {
			return fmt.Errorf("%w: query parameter %s missing", errNotPresigned, p)
		}
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return fmt.Errorf("%w: algorithm %q", errNotPresigned, q.Get("X-Amz-Algorithm"))
	}
	signedAt, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("%w: X-Amz-Date: %v", errNotPresigned, err)
	}
	expires, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || expires < 1 || expires > 7*24*3600 {
		return fmt.Errorf("%w: X-Amz-Expires %q", errNotPresigned, q.Get("X-Amz-Expires"))
	}
	if now.After(signedAt.Add(time.Duration(expires) * time.Second)) {
		return fmt.Errorf("%w: the URL expired at %s", errNotPresigned, signedAt.Add(time.Duration(expires)*time.Second).Format(time.RFC3339))
	}
	signed := map[string]bool{}
	for _, h := range strings.Split(q.Get("X-Amz-SignedHeaders"), ";") {
		signed[strings.ToLower(h)] = true
	}
	for h := range r.Header {
		if lh := strings.ToLower(h); strings.HasPrefix(lh, "x-amz-") && !signed[lh] {
			return fmt.Errorf("%w: header %s is not signed", errNotPresigned, h)
		}
	}

	// Sign the same request again with the stack's credentials and compare.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	rq := url.Values{}
	for k, v := range q {
		if k != "X-Amz-Signature" {
			rq[k] = v
		}
	}
	u.RawQuery = rq.Encode()
	again, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotPresigned, err)
	}
	again.ContentLength = r.ContentLength
	for h := range signed {
		switch h {
		case "host", "content-length":
			continue
		}
		vs := r.Header.Values(h)
		if len(vs) == 0 {
			return fmt.Errorf("%w: signed header %s missing", errNotPresigned, h)
		}
		again.Header[http.CanonicalHeaderKey(h)] = vs
	}
	c, err := creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("upload proxy: credentials: %w", err)
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	out, _, err := signer.PresignHTTP(ctx, c, again, "UNSIGNED-PAYLOAD", "s3", region, signedAt)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotPresigned, err)
	}
	want, err := url.Parse(out)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotPresigned, err)
	}
	if !hmac.Equal([]byte(want.Query().Get("X-Amz-Signature")), []byte(q.Get("X-Amz-Signature"))) {
		return fmt.Errorf("%w: signature does not match", errNotPresigned)
	}
	return nil
}
