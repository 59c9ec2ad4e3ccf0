package api

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// NewHTTPHandler serves h over net/http the way API Gateway would invoke it:
// each request becomes the APIGatewayV2HTTPRequest an HTTP API ($default
// stage; no authorizer, so every caller is anonymous, unless a middleware
// attached one with WithAuthorizer) would send, and the
// handler's response is written back. The local runner mounts it on
// 127.0.0.1.
//
// Like API Gateway, it reads a request body up to APIGatewayMaxPayload
// before the handler answers, even when the handler will refuse it as too
// large: a client still sending its body then gets the 413, not a
// connection reset. A declared Content-Length above that limit is 413 at
// once, as API Gateway answers it without invoking the function.
func NewHTTPHandler(h *Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > APIGatewayMaxPayload {
			WriteHTTP(w, newProblem(TypeBodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large",
				fmt.Sprintf("The request body is larger than API Gateway's %d-byte payload limit.", APIGatewayMaxPayload)).response())
			return
		}
		ev, err := RequestFromHTTP(r, h.limits().body)
		if err != nil {
			resp := newProblem(TypeMalformedJSON, http.StatusBadRequest, "Unreadable request body", "The request body could not be read.").response()
			WriteHTTP(w, resp)
			return
		}
		if a := authorizerFrom(r.Context()); a != nil {
			ev.RequestContext.Authorizer = a
		}
		resp, _ := h.Handle(r.Context(), ev)
		WriteHTTP(w, resp)
	})
}

// APIGatewayMaxPayload is API Gateway's request payload limit (10 MB). It
// reads a request up to this size before the function sees it.
const APIGatewayMaxPayload = 10 << 20

// RequestFromHTTP converts r into an API Gateway HTTP API payload 2.0
// event. At most maxBody+1 bytes of the body are kept, so a larger body is
// still recognisably over the cap; the rest, up to APIGatewayMaxPayload in
// all, is read and discarded so the client can finish sending before it is
// answered. A body that is not UTF-8 is base64-encoded, as API Gateway does
// for binary payloads.
func RequestFromHTTP(r *http.Request, maxBody int) (events.APIGatewayV2HTTPRequest, error) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, int64(maxBody)+1))
		if err != nil {
			return events.APIGatewayV2HTTPRequest{}, err
		}
		if len(body) > maxBody {
			if rest := int64(APIGatewayMaxPayload) - int64(len(body)); rest > 0 {
				// A failure here is the client going away; the 413 stands.
				_, _ = io.CopyN(io.Discard, r.Body, rest)
			}
		}
	}
	headers := make(map[string]string, len(r.Header))
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	if r.Host != "" {
		headers["host"] = r.Host
	}
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.String())
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = make(map[string]string, len(q))
		for k, vs := range q {
			query[k] = strings.Join(vs, ",")
		}
	}
	ip := r.RemoteAddr
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	var rid [8]byte
	_, _ = rand.Read(rid[:])
	now := time.Now().UTC()
	rawPath := r.URL.EscapedPath()
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              "$default",
		RawPath:               rawPath,
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     "$default",
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    hex.EncodeToString(rid[:]),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.Split(r.Host, ".")[0],
			Time:         now.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  ip,
				UserAgent: r.UserAgent(),
			},
		},
	}
	probe := events.APIGatewayV2HTTPRequest{RawPath: rawPath}
	if rt, ok := matchRoute(&probe); ok && r.Method == rt.id.method() {
		ev.RouteKey = rt.id.routeKey()
		ev.RequestContext.RouteKey = ev.RouteKey
		if rt.taskID != "" {
			ev.PathParameters = map[string]string{"id": rt.taskID}
		}
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev, nil
}

// WriteHTTP writes an API Gateway response to w.
func WriteHTTP(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	hd := w.Header()
	for k, v := range resp.Headers {
		hd.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			hd.Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		hd.Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = b
		}
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if status != http.StatusNoContent && len(body) > 0 {
		_, _ = w.Write(body)
	}
}
