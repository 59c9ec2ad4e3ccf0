package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/taskledger/taskledger/internal/api"
)

// The page's files are text: validate them as strings against the document.
func init() {
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
	}
}

func publicRequest(method, routeKey, rawPath string, params map[string]string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RouteKey:       routeKey,
		RawPath:        rawPath,
		PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default",
			HTTP:  events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: rawPath},
		},
	}
}

// The submit handler serves the page and its files on the template's
// public routes (and, locally, on $default by path), with its headers.
func TestPublicRoutesServeThePage(t *testing.T) {
	t.Parallel()
	h := &api.Handler{Auth: api.AuthConfig{Mode: "jwt", Issuer: "http://127.0.0.1:9999", ClientID: "c1"}}
	ctx := context.Background()
	cases := []struct {
		name   string
		req    events.APIGatewayV2HTTPRequest
		status int
		ctype  string
		cache  string
		has    string
	}{
		{"GET / by route key", publicRequest("GET", "GET /", "/", nil), 200, "text/html; charset=utf-8", "no-cache", `src="static/app.js"`},
		{"GET / locally", publicRequest("GET", "$default", "/", nil), 200, "text/html; charset=utf-8", "no-cache", "<title>taskledger</title>"},
		{"static by route key", publicRequest("GET", "GET /static/{proxy+}", "/static/lib.js", map[string]string{"proxy": "lib.js"}), 200, "text/javascript; charset=utf-8", "public, max-age=300", "TaskledgerLib"},
		{"static css", publicRequest("GET", "$default", "/static/style.css", nil), 200, "text/css; charset=utf-8", "public, max-age=300", ":root"},
		{"HEAD has no body", publicRequest("HEAD", "$default", "/static/app.js", nil), 200, "text/javascript; charset=utf-8", "public, max-age=300", ""},
		{"missing file", publicRequest("GET", "$default", "/static/nope.js", nil), 404, "application/problem+json", "", ""},
		{"no traversal", publicRequest("GET", "GET /static/{proxy+}", "/static/../go.mod", map[string]string{"proxy": "../go.mod"}), 404, "application/problem+json", "", ""},
		{"no subdirectories", publicRequest("GET", "$default", "/static/a/b.js", nil), 404, "application/problem+json", "", ""},
		{"POST / is 405", publicRequest("POST", "$default", "/", nil), 405, "application/problem+json", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := h.Handle(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.status, resp.Body)
			}
			if tc.req.RequestContext.HTTP.Method == http.MethodGet {
				conform(t, tc.req, resp)
			}
			if got := resp.Headers["Content-Type"]; got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			if tc.status != 200 {
				return
			}
			if got := resp.Headers["Cache-Control"]; got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if tc.has == "" && resp.Body != "" {
				t.Errorf("HEAD answered a body of %d bytes", len(resp.Body))
			}
			if !strings.Contains(resp.Body, tc.has) {
				t.Errorf("body lacks %q", tc.has)
			}
			csp := resp.Headers["Content-Security-Policy"]
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "connect-src 'self' https: http://127.0.0.1:9999"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe") {
				t.Errorf("CSP allows unsafe sources: %q", csp)
			}
			if resp.Headers["X-Content-Type-Options"] != "nosniff" || resp.Headers["ETag"] == "" {
				t.Errorf("headers %v: want nosniff and an ETag", resp.Headers)
			}
		})
	}
}

func TestAuthConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		auth api.AuthConfig
		want map[string]string
	}{
		{api.AuthConfig{}, map[string]string{"auth_mode": "none", "issuer": "", "client_id": "", "scopes": api.DefaultScopes, "authorization_endpoint": ""}},
		{api.AuthConfig{Mode: "jwt", Issuer: "https://idp.example", ClientID: "c1", Scopes: "openid"},
			map[string]string{"auth_mode": "jwt", "issuer": "https://idp.example", "client_id": "c1", "scopes": "openid", "authorization_endpoint": ""}},
	} {
		h := &api.Handler{Auth: tc.auth}
		resp, _ := h.Handle(ctx, publicRequest("GET", "GET /auth/config", "/auth/config", nil))
		if resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != "application/json" {
			t.Fatalf("GET /auth/config = %d %s", resp.StatusCode, resp.Headers["Content-Type"])
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("body %v, want %v", got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q", k, got[k], v)
			}
		}
	}
}
