package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// CORS settings the handler answers with.
const (
	// CORSAllowHeaders are the request headers a browser may send.
	CORSAllowHeaders = "content-type, idempotency-key, authorization, x-correlation-id"
	// CORSExposeHeaders are the response headers a browser script may read.
	CORSExposeHeaders = "Location, Idempotent-Replayed, X-Correlation-Id, Retry-After"
	// CORSMaxAge is how long (seconds) a browser may cache a preflight answer.
	CORSMaxAge = 600
)

// ParseOrigins splits a comma-separated origin list (ALLOWED_ORIGINS),
// trimming spaces and trailing slashes and dropping empty entries. "*"
// allows every origin.
func ParseOrigins(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		if o != "" {
			out = append(out, o)
		}
	}
	return out
}

// allowOrigin returns the Access-Control-Allow-Origin value for origin, or
// false when origin is not allowed.
func (h *Handler) allowOrigin(origin string) (string, bool) {
	if origin == "" {
		return "", false
	}
	for _, o := range h.AllowedOrigins {
		if o == "*" {
			return "*", true
		}
		if strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return origin, true
		}
	}
	return "", false
}

func addVary(r *events.APIGatewayV2HTTPResponse, names ...string) {
	if r.Headers == nil {
		r.Headers = map[string]string{}
	}
	have := r.Headers["Vary"]
	for _, n := range names {
		if !strings.Contains(have, n) {
			if have != "" {
				have += ", "
			}
			have += n
		}
	}
	r.Headers["Vary"] = have
}

// applyCORS adds the CORS response headers for an allowed Origin.
func (h *Handler) applyCORS(hd map[string]string, r *events.APIGatewayV2HTTPResponse) {
	origin := hd["origin"]
	if origin == "" || len(h.AllowedOrigins) == 0 {
		return
	}
	addVary(r, "Origin")
	allow, ok := h.allowOrigin(origin)
	if !ok {
		return
	}
	r.Headers["Access-Control-Allow-Origin"] = allow
	r.Headers["Access-Control-Expose-Headers"] = CORSExposeHeaders
}

// preflight answers OPTIONS on a known path: 204 with the allowed methods
// and headers for an allowed origin, 403 for another origin, and a plain
// 204 with Allow when the request is not a CORS preflight.
func (h *Handler) preflight(hd map[string]string, rt route) events.APIGatewayV2HTTPResponse {
	methods := strings.Join(rt.allowed(), ", ")
	origin, reqMethod := hd["origin"], hd["access-control-request-method"]
	if origin == "" || reqMethod == "" {
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent, Headers: map[string]string{"Allow": methods}}
	}
	if _, ok := h.allowOrigin(origin); !ok {
		p := newProblem(TypeOriginNotAllowed, http.StatusForbidden, "Origin not allowed",
			"This origin is not in the API's CORS allow-list (ALLOWED_ORIGINS).").withField("Origin")
		r := p.response()
		addVary(&r, "Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers")
		return r
	}
	r := events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent, Headers: map[string]string{
		"Allow":                        methods,
		"Access-Control-Allow-Methods": methods,
		"Access-Control-Allow-Headers": CORSAllowHeaders,
		"Access-Control-Max-Age":       strconv.Itoa(CORSMaxAge),
	}}
	addVary(&r, "Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers")
	return r
}
