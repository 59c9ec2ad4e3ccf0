package local

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// UploadProxyPath is where the local stack's HTTP server passes a
// presigned document PUT through to the emulator. The payload store signs
// upload URLs for this path (payload.Options.PresignEndpoint), so the
// page's PUT goes to its own origin: no CORS on the emulator needed.
// Deployed, the URL names S3 itself (the bucket's CORS rule allows PUT).
const UploadProxyPath = "/s3"

// uploadProxy forwards PUT /s3/<bucket>/uploads/... to the emulator
// endpoint, less the /s3 prefix, with the signed query and headers as
// they came. Anything else (another method, bucket or prefix) is refused,
// so the proxy is no general door to the emulator.
func uploadProxy(endpoint, bucket string) http.Handler {
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
		if !strings.HasPrefix(r.URL.Path, prefix) || strings.Contains(r.URL.Path, "..") {
			http.Error(w, "not an upload of the payload bucket", http.StatusNotFound)
			return
		}
		proxy.ServeHTTP(w, r)
	})
}
