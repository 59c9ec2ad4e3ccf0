package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/payload"
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
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "connect-src 'self' http://127.0.0.1:9999;"} {
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

// connect-src names exact origins, never a scheme: the page's own, the
// issuer's (discovery), the configured authorization endpoint's (Cognito's
// hosted UI, which also serves the token endpoint), and the payload
// bucket's (presigned document uploads). With "https:" any script running
// in the page could send a token anywhere.
func TestCSPConnectSrcNamesExactOrigins(t *testing.T) {
	t.Parallel()
	bucket, err := payload.New(s3.New(s3.Options{Region: "eu-west-1"}), "tl-payloads-123", payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cognito := api.AuthConfig{Mode: "jwt", Issuer: "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc", ClientID: "c1",
		AuthorizationEndpoint: "https://tl-x.auth.eu-west-1.amazoncognito.com/oauth2/authorize"}
	for _, tc := range []struct {
		name string
		h    *api.Handler
		want string
	}{
		{"auth none", &api.Handler{}, "'self'"},
		{"iam", &api.Handler{Auth: api.AuthConfig{Mode: "iam"}}, "'self'"},
		{"jwt issuer", &api.Handler{Auth: api.AuthConfig{Mode: "jwt", Issuer: "https://idp.example/realms/a", ClientID: "c1"}}, "'self' https://idp.example"},
		{"local http issuer", &api.Handler{Auth: api.AuthConfig{Mode: "jwt", Issuer: "http://127.0.0.1:9999", ClientID: "c1"}}, "'self' http://127.0.0.1:9999"},
		{"cognito", &api.Handler{Auth: cognito},
			"'self' https://cognito-idp.eu-west-1.amazonaws.com https://tl-x.auth.eu-west-1.amazoncognito.com"},
		{"cognito with uploads", &api.Handler{Auth: cognito, Payloads: bucket},
			"'self' https://cognito-idp.eu-west-1.amazonaws.com https://tl-x.auth.eu-west-1.amazoncognito.com https://tl-payloads-123.s3.eu-west-1.amazonaws.com"},
		{"same origin twice", &api.Handler{Auth: api.AuthConfig{Mode: "jwt", Issuer: "https://idp.example/a", ClientID: "c1",
			AuthorizationEndpoint: "https://idp.example/authorize"}}, "'self' https://idp.example"},
		{"no injection", &api.Handler{Auth: api.AuthConfig{Mode: "jwt", Issuer: "https://idp.example; connect-src *", ClientID: "c1",
			AuthorizationEndpoint: "javascript:alert(1)"}}, "'self'"},
		{"stream URL", &api.Handler{Auth: api.AuthConfig{StreamURL: "wss://abc123.execute-api.eu-west-1.amazonaws.com/live"}},
			"'self' wss://abc123.execute-api.eu-west-1.amazonaws.com"},
		{"local stream URL", &api.Handler{Auth: api.AuthConfig{StreamURL: "ws://127.0.0.1:3001"}}, "'self' ws://127.0.0.1:3001"},
		{"no stream injection", &api.Handler{Auth: api.AuthConfig{StreamURL: "wss://a.example; connect-src *"}}, "'self'"},
		{"stream URL not a WebSocket", &api.Handler{Auth: api.AuthConfig{StreamURL: "https://a.example"}}, "'self'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			csp := tc.h.ContentSecurityPolicy()
			var got string
			n := 0
			for _, d := range strings.Split(csp, ";") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(d), "connect-src "); ok {
					got = v
					n++
				}
			}
			if n != 1 || got != tc.want {
				t.Errorf("CSP %q: connect-src %q (%d directives), want exactly %q", csp, got, n, tc.want)
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
