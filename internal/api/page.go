package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/web"
)

// Public routes: no authorizer in front of them (the page must load, and
// learn how to sign in, before the caller has a token).
const (
	routeKeyPage       = "GET /"
	routeKeyStatic     = "GET /static/{proxy+}"
	routeKeyAuthConfig = "GET /auth/config"
)

// Cache lifetimes of the page's files. index.html is revalidated on every
// load (it names the scripts); the scripts and the stylesheet are not
// fingerprinted, so they are cached briefly and revalidated by ETag.
const (
	pageCacheControl   = "no-cache"
	staticCacheControl = "public, max-age=300"
)

// pageFile is one embedded file of the page, ready to serve.
type pageFile struct {
	body        string
	contentType string
	etag        string
}

var (
	pageOnce  sync.Once
	pageFiles map[string]pageFile
)

// loadPage reads web.FS once: every file at its top level, by name.
func loadPage() map[string]pageFile {
	pageOnce.Do(func() {
		pageFiles = map[string]pageFile{}
		entries, err := fs.ReadDir(web.FS, ".")
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			b, err := fs.ReadFile(web.FS, e.Name())
			if err != nil {
				continue
			}
			sum := sha256.Sum256(b)
			pageFiles[e.Name()] = pageFile{
				body:        string(b),
				contentType: contentType(e.Name()),
				etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`,
			}
		}
	})
	return pageFiles
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// ContentSecurityPolicy is the policy the page is served with: scripts and
// styles from this origin only (no inline code, no eval), no plugins, no
// framing, no <base>, forms only to this origin. connect-src names exact
// origins, never a scheme: this origin (the API: the page talks to no
// other), the issuer's (its discovery document), the configured
// authorization endpoint's (Cognito's hosted UI, which also serves the
// token endpoint; the page refuses endpoints on any other origin), the
// payload bucket's (presigned document uploads), and the stream URL's
// (streamed replies, a ws:// or wss:// origin). An issuer whose token
// endpoint is on yet another origin is not supported.
func (h *Handler) ContentSecurityPolicy() string {
	connect := []string{"'self'"}
	add := func(origin string) {
		if origin != "" && !slices.Contains(connect, origin) {
			connect = append(connect, origin)
		}
	}
	add(wsOrigin(h.Auth.StreamURL))
	add(cspOrigin(h.Auth.Issuer))
	add(cspOrigin(h.Auth.AuthorizationEndpoint))
	if h.Payloads != nil {
		if o, err := h.Payloads.UploadOrigin(context.Background()); err == nil {
			add(cspOrigin(o))
		}
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src " + strings.Join(connect, " "),
		"base-uri 'none'",
		"form-action 'self'",
		"frame-ancestors 'none'",
	}, "; ")
}

// cspHost is what cspOrigin lets into the policy: a host name or address
// and a port, nothing that could end a source or a directive.
var cspHost = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$`)

// cspOrigin is the scheme://host[:port] of an http(s) URL, for a CSP
// source list; "" for anything else.
func cspOrigin(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || !cspHost.MatchString(u.Host) {
		return ""
	}
	return u.Scheme + "://" + strings.ToLower(u.Host)
}

// wsOrigin is the scheme://host[:port] of a ws(s) URL (the stream URL of
// streamed replies), for a CSP source list; "" for anything else.
func wsOrigin(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || !cspHost.MatchString(u.Host) {
		return ""
	}
	return u.Scheme + "://" + strings.ToLower(u.Host)
}

// publicPath is the request's path less a named stage, for the public
// routes (API Gateway's route key wins when it names one).
func publicPath(req *events.APIGatewayV2HTTPRequest) string {
	switch req.RouteKey {
	case routeKeyPage:
		return "/"
	case routeKeyAuthConfig:
		return "/auth/config"
	case routeKeyStatic:
		if p := req.PathParameters["proxy"]; p != "" {
			return "/static/" + p
		}
	}
	p := req.RawPath
	if p == "" {
		p = req.RequestContext.HTTP.Path
	}
	if st := req.RequestContext.Stage; st != "" && st != "$default" {
		if p == "/"+st {
			return "/"
		}
		if strings.HasPrefix(p, "/"+st+"/") {
			p = p[len(st)+1:]
		}
	}
	return p
}

// servePublic answers the public routes: the page at "/" (and
// /index.html), its files at /static/{name}, and GET /auth/config. ok is
// false for any other path.
func (h *Handler) servePublic(req *events.APIGatewayV2HTTPRequest, method string) (events.APIGatewayV2HTTPResponse, bool) {
	p := publicPath(req)
	var name string
	switch {
	case p == "/auth/config":
		if method != http.MethodGet && method != http.MethodHead {
			return methodNotAllowed(method, p), true
		}
		return h.authConfig(), true
	case p == "/" || p == "/index.html":
		name = "index.html"
	case strings.HasPrefix(p, "/static/"):
		n, err := url.PathUnescape(strings.TrimPrefix(p, "/static/"))
		if err != nil || !fs.ValidPath(n) || strings.Contains(n, "/") {
			return pageNotFound(), true
		}
		name = n
	default:
		return events.APIGatewayV2HTTPResponse{}, false
	}
	if method != http.MethodGet && method != http.MethodHead {
		return methodNotAllowed(method, p), true
	}
	f, ok := loadPage()[name]
	if !ok {
		return pageNotFound(), true
	}
	cache := staticCacheControl
	if name == "index.html" {
		cache = pageCacheControl
	}
	hd := map[string]string{
		"Content-Type":                 f.contentType,
		"Cache-Control":                cache,
		"ETag":                         f.etag,
		"Content-Security-Policy":      h.ContentSecurityPolicy(),
		"X-Content-Type-Options":       "nosniff",
		"Referrer-Policy":              "no-referrer",
		"X-Frame-Options":              "DENY",
		"Cross-Origin-Opener-Policy":   "same-origin",
		"Cross-Origin-Resource-Policy": "same-origin",
	}
	if inm := lowerHeaders(req.Headers)["if-none-match"]; inm != "" && etagMatch(inm, f.etag) {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNotModified, Headers: hd}, true
	}
	body := f.body
	if method == http.MethodHead {
		body = ""
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: hd, Body: body}, true
}

func etagMatch(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == etag || v == "*" {
			return true
		}
	}
	return false
}

func pageNotFound() events.APIGatewayV2HTTPResponse {
	return newProblem(TypeNotFound, http.StatusNotFound, "Not found", "No such file.").response()
}

func methodNotAllowed(method, p string) events.APIGatewayV2HTTPResponse {
	pr := newProblem(TypeMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed",
		clip(method, 16)+" is not supported on "+clip(p, 64)+".")
	pr.allow = []string{http.MethodGet, http.MethodHead}
	return pr.response()
}
