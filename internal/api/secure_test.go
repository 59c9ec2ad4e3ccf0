package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// testIDKey is the server secret task ids are derived with in these tests.
var testIDKey = ledger.SecretKey("test-only-task-id-key-0123456789abcdef")

// withIDKey rebuilds the bundle's ledger with the server secret, as the
// deployed submit function does.
func withIDKey(t *testing.T, b *bundle) {
	t.Helper()
	cfg := b.l.Config()
	cfg.IDKey = testIDKey
	l, err := ledger.New(b.env.DDB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.l, b.h.Ledger = l, l
}

// TestKeyIsUselessToOtherCallers: in every auth mode, a second caller who
// knows the first caller's Idempotency-Key can neither read nor cancel nor
// regenerate the first caller's task, and the 422 it may get leaks no task
// id or state. In none mode every caller is anonymous: only the server's
// secret in the id derivation stops the id being computed from the key.
func TestKeyIsUselessToOtherCallers(t *testing.T) {
	modes := []struct {
		name          string
		auth          api.AuthConfig
		first, second reqOpt
	}{
		{"jwt", api.AuthConfig{Mode: api.AuthJWT, Issuer: "https://issuer.example.com", ClientID: "page"}, asJWT("alice"), asJWT("mallory")},
		{"iam", api.AuthConfig{Mode: api.AuthIAM}, asIAM("arn:aws:iam::123456789012:user/alice", "AIDA1"), asIAM("arn:aws:iam::123456789012:user/mallory", "AIDA2")},
		{"none", api.AuthConfig{Mode: api.AuthNone}, func(*events.APIGatewayV2HTTPRequest) {}, func(*events.APIGatewayV2HTTPRequest) {}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e, withHandler(func(h *api.Handler) { h.Auth = m.auth }))
				withIDKey(t, b)
				const key = "order-4711"
				first := b.do(t, submitReq(key, body("the first caller's text"), m.first))
				wantStatus(t, first, http.StatusAccepted)
				id := view(t, first).TaskID

				// Every id the second caller could compute from the key.
				guesses := []string{ledger.TaskID(api.Anonymous, key), ledger.TaskID("jwt:alice", key),
					ledger.TaskID("iam:arn:aws:iam::123456789012:user/alice", key), ledger.TaskID(key, "")}
				for _, g := range guesses {
					if g == id {
						t.Fatalf("the task id %s can be computed from the key", id)
					}
					wantProblem(t, b.do(t, getReq(g, m.second)), http.StatusNotFound, api.TypeNotFound)
					wantProblem(t, b.do(t, cancelReq(g, m.second)), http.StatusNotFound, api.TypeNotFound)
				}
				// The same key with another payload: a 422 that names
				// nothing (none), or the second caller's own task (jwt, iam).
				resp := b.do(t, submitReq(key, body("the second caller's text"), m.second))
				switch m.name {
				case "none":
					p := wantProblem(t, resp, http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
					if p.TaskID != "" || p.State != "" || strings.Contains(resp.Body, id) || resp.Headers["Location"] != "" {
						t.Fatalf("the 422 leaks the first caller's task: %v %s", resp.Headers, resp.Body)
					}
				default:
					wantStatus(t, resp, http.StatusAccepted)
					if other := view(t, resp).TaskID; other == id {
						t.Fatal("the second caller got the first caller's task")
					}
				}
				// With the real id (leaked some other way), jwt and iam
				// callers still see nothing: the scope differs.
				if m.name != "none" {
					wantProblem(t, b.do(t, getReq(id, m.second)), http.StatusNotFound, api.TypeNotFound)
					wantProblem(t, b.do(t, cancelReq(id, m.second)), http.StatusNotFound, api.TypeNotFound)
					wantProblem(t, b.do(t, regenReq(id, "r-1", "", m.second)), http.StatusNotFound, api.TypeNotFound)
				}
				got, err := b.l.Get(context.Background(), id)
				if err != nil || got.State != ledger.StateQueued || !strings.Contains(got.Input, "first caller") {
					t.Fatalf("the first caller's task changed: %+v, %v", got, err)
				}
				// The owner still reads and replays it.
				wantStatus(t, b.do(t, getReq(id, m.first)), http.StatusOK)
				replay := b.do(t, submitReq(key, body("the first caller's text"), m.first))
				if replay.StatusCode != http.StatusOK || view(t, replay).TaskID != id {
					t.Fatalf("the owner's replay: %d %s", replay.StatusCode, replay.Body)
				}
			})
		})
	}
}

// TestAuthorizerRequired: with jwt or iam configured, a /tasks request that
// reaches the function without an authorizer context (a route left open by
// mistake) is 401 and writes nothing.
func TestAuthorizerRequired(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		for _, mode := range []string{api.AuthJWT, api.AuthIAM} {
			b := setup(t, e, withHandler(func(h *api.Handler) { h.Auth = api.AuthConfig{Mode: mode} }))
			wantProblem(t, b.do(t, submitReq("open-route-"+mode, body("x"))), http.StatusUnauthorized, api.TypeUnauthenticated)
			if _, err := b.l.Get(context.Background(), b.l.TaskID(api.Anonymous, "open-route-"+mode)); err == nil {
				t.Fatalf("%s: the refused submit wrote a task", mode)
			}
			wantStatus(t, b.do(t, submitReq("authorized-"+mode, body("x"), asJWT("alice"))), http.StatusAccepted)
		}
	})
}

// TestAuthConfig: GET /auth/config is public, needs no caller, and says
// exactly what the page needs to sign in — never a secret.
func TestAuthConfigEveryField(t *testing.T) {
	t.Parallel()
	h := &api.Handler{Auth: api.AuthConfig{Mode: api.AuthJWT, Issuer: "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc", ClientID: "client123",
		AuthorizationEndpoint: "https://tl.auth.eu-west-1.amazoncognito.com/oauth2/authorize"}}
	get := func(h *api.Handler, method, path, routeKey string) events.APIGatewayV2HTTPResponse {
		req := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: routeKey, RawPath: path, Headers: map[string]string{},
			RequestContext: events.APIGatewayV2HTTPRequestContext{Stage: "$default", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}}}
		resp, err := h.Handle(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		conform(t, req, resp)
		return resp
	}
	for _, rk := range []string{"GET /auth/config", "$default"} {
		resp := get(h, http.MethodGet, "/auth/config", rk)
		wantStatus(t, resp, http.StatusOK)
		var got map[string]string
		if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"auth_mode": "jwt", "issuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_abc", "client_id": "client123",
			"scopes": "openid email profile", "authorization_endpoint": "https://tl.auth.eu-west-1.amazoncognito.com/oauth2/authorize"}
		if len(got) != len(want) {
			t.Fatalf("%s: body %s, want exactly %v", rk, resp.Body, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", rk, k, got[k], v)
			}
		}
	}
	var none map[string]string
	_ = json.Unmarshal([]byte(get(&api.Handler{}, http.MethodGet, "/auth/config", "$default").Body), &none)
	if none["auth_mode"] != "none" || none["issuer"] != "" || none["client_id"] != "" {
		t.Errorf("zero config: %v", none)
	}
	wantProblem(t, get(h, http.MethodPost, "/auth/config", "$default"), http.StatusMethodNotAllowed, api.TypeMethodNotAllowed)
}

func TestParseAuthConfig(t *testing.T) {
	t.Parallel()
	ok := []struct{ mode, iss, client string }{{"jwt", "https://issuer.example.com", "c"}, {"iam", "", ""}, {"none", "", ""}}
	for _, c := range ok {
		if a, err := api.ParseAuthConfig(c.mode, c.iss, c.client, ""); err != nil || a.Mode != c.mode {
			t.Errorf("%v: %+v, %v", c, a, err)
		}
	}
	bad := []struct{ mode, iss, client, authz string }{
		{"", "", "", ""}, {"cognito", "", "", ""}, {"jwt", "", "c", ""}, {"jwt", "http://issuer.example.com", "c", ""},
		{"jwt", "https://issuer.example.com", "", ""}, {"none", "", "", "http://x"},
	}
	for _, c := range bad {
		if _, err := api.ParseAuthConfig(c.mode, c.iss, c.client, c.authz); err == nil {
			t.Errorf("%v accepted", c)
		}
	}
}
