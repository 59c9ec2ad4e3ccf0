package local

import (
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// UploadProxyPath is where the local stack's HTTP server passes a
// presigned document PUT through to the emulator. The payload store signs
// upload URLs for this path (payload.Options.PresignEndpoint), so the
// page's PUT goes to its own origin: no CORS on the emulator needed.
// Deployed, the URL names S3 itself (the bucket's CORS rule allows PUT).
const UploadProxyPath = "/s3"

// uploadProxy forwards PUT /s3/<bucket>/uploads/<scope_hash>/<id> to the
// emulator endpoint, less the /s3 prefix, with the signed query and
// headers as they came — but only a request presigned by the stack's own
// credentials for exactly that key, unexpired, with no unsigned x-amz-*
// header (checkPresigned): the emulators verify no signature, so without
// this anyone on the machine could write any caller's upload, or send
// x-amz-copy-source and copy any key of the bucket into an upload.
// Anything else (another method, bucket or prefix) is refused, so the
// proxy is no general door to the emulator.
func uploadProxy(endpoint, bucket string, creds aws.CredentialsProvider, region string) http.Handler {
	target, err := url.Parse(endpoint)
	if err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "upload proxy: bad emulator endpoint", http.StatusInternalServerError)
		})
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, UploadProxyPath)
		r.Out.URL.RawPath = ""
		r.Out.Host = target.Host
	}}
	prefix := UploadProxyPath + "/" + bucket + "/uploads/"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			w.Header().Set("Allow", http.MethodPut)
			http.Error(w, "only the PUT of a presigned upload", http.StatusMethodNotAllowed)
			return
		}
		if !strings.HasPrefix(r.URL.Path, prefix) || strings.Contains(r.URL.Path, "..") || r.URL.RawPath != "" {
			http.Error(w, "not an upload of the payload bucket", http.StatusNotFound)
			return
		}
		key := strings.TrimPrefix(r.URL.Path, UploadProxyPath+"/"+bucket+"/")
		if err := checkPresigned(r.Context(), r, key, creds, region, time.Now()); err != nil {
			status := http.StatusForbidden
			if !errors.Is(err, errNotPresigned) {
				status = http.StatusInternalServerError
			}
			http.Error(w, "upload proxy: "+err.Error(), status)
			return
		}
		proxy.ServeHTTP(w, r)
	})
}
