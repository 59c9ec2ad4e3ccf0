package local_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/taskledger/taskledger/internal/local"
)

// testIssuer is a fixture standing in for an OpenID Connect issuer's
// discovery document and JWKS (tokens are signed with go-jose). The
// browser test signs in against a real issuer implementation
// (web/test/signin.mjs); this one lets the authorizer's rules be checked
// token by token without node.
type testIssuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
	kid string
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key, kid: "k1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/jwks",
			"authorization_endpoint": is.srv.URL + "/authorize", "token_endpoint": is.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: is.kid, Algorithm: "RS256", Use: "sig"}}})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// token signs claims (iss, iat, nbf and a one-hour exp added unless set).
func (is *testIssuer) token(t *testing.T, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	now := time.Now()
	full := map[string]any{"iss": is.srv.URL, "iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(full, k)
		} else {
			full[k] = v
		}
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: is.kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(full).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func call(t *testing.T, b stackBundle, method, path, bearer, key string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"kind":"generate","input":{"prompt":"hello"}}`)
	}
	req, _ := http.NewRequest(method, b.st.URL+path, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
	}
	if bearer != "" {
		req.Header.Set("Authorization", bearer)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// With an issuer configured, /tasks… sit behind the emulated JWT
// authorizer: API Gateway's 401 for every token it would refuse (and
// nothing written), and each accepted caller scoped by its sub.
func TestStackJWTAuthorizer(t *testing.T) {
	t.Parallel()
	is := newTestIssuer(t)
	b := setupStack(t, local.Options{StatusEvery: -1, OIDCIssuer: is.srv.URL, OIDCAudience: []string{"client-1"}})
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	alice := is.token(t, is.key, map[string]any{"sub": "alice", "aud": "client-1", "email": "a@example.com"})

	refused := map[string]string{
		"no token":             "",
		"garbage":              "Bearer garbage",
		"expired":              "Bearer " + is.token(t, is.key, map[string]any{"sub": "alice", "aud": "client-1", "exp": time.Now().Add(-time.Minute).Unix()}),
		"not yet valid":        "Bearer " + is.token(t, is.key, map[string]any{"sub": "alice", "aud": "client-1", "nbf": time.Now().Add(time.Hour).Unix()}),
		"wrong audience":       "Bearer " + is.token(t, is.key, map[string]any{"sub": "alice", "aud": "client-2"}),
		"aud beats client_id":  "Bearer " + is.token(t, is.key, map[string]any{"sub": "alice", "aud": "client-2", "client_id": "client-1"}),
		"no aud nor client_id": "Bearer " + is.token(t, is.key, map[string]any{"sub": "alice"}),
		"wrong issuer":         "Bearer " + is.token(t, is.key, map[string]any{"sub": "alice", "aud": "client-1", "iss": "https://elsewhere.example"}),
		"unknown key":          "Bearer " + is.token(t, other, map[string]any{"sub": "alice", "aud": "client-1"}),
		"alg none":             "Bearer " + strings.Join(strings.Split(alice, ".")[:2], ".") + ".",
	}
	for name, auth := range refused {
		status, body := call(t, b, http.MethodPost, "/tasks", auth, "refused-"+name)
		if status != http.StatusUnauthorized || body != `{"message":"Unauthorized"}` {
			t.Errorf("%s: %d %s, want 401 {\"message\":\"Unauthorized\"}", name, status, body)
		}
	}
	if status, _ := call(t, b, http.MethodGet, "/tasks/t_x", "", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /tasks/{id} without a token = %d, want 401", status)
	}
	// The conversation route is a task route: behind the same authorizer.
	if status, body := call(t, b, http.MethodGet, "/conversations/c1", "", ""); status != http.StatusUnauthorized || body != `{"message":"Unauthorized"}` {
		t.Errorf("GET /conversations/{id} without a token = %d %s, want the authorizer's 401", status, body)
	}
	if status, body := call(t, b, http.MethodGet, "/conversations/c1", "Bearer "+alice, ""); status != http.StatusOK {
		t.Errorf("alice GET /conversations/{id} = %d %s, want 200", status, body)
	}
	// So is the approvals inbox (the deployed route has the authorizer):
	// without it a signed-in caller would be read as anonymous.
	if status, body := call(t, b, http.MethodGet, "/approvals", "", ""); status != http.StatusUnauthorized || body != `{"message":"Unauthorized"}` {
		t.Errorf("GET /approvals without a token = %d %s, want the authorizer's 401", status, body)
	}
	if status, body := call(t, b, http.MethodGet, "/approvals", "Bearer "+alice, ""); status != http.StatusOK {
		t.Errorf("alice GET /approvals = %d %s, want 200", status, body)
	}

	// Accepted: with or without the Bearer prefix (API Gateway takes both).
	status, body := call(t, b, http.MethodPost, "/tasks", "Bearer "+alice, "k1")
	if status != http.StatusAccepted {
		t.Fatalf("alice POST = %d %s", status, body)
	}
	var v taskView
	_ = json.Unmarshal([]byte(body), &v)
	task, err := b.st.Ledger.Get(t.Context(), v.TaskID)
	if err != nil || task.Scope != "jwt:alice" {
		t.Fatalf("alice's task scope = %q (%v), want jwt:alice", task.Scope, err)
	}
	if status, _ := call(t, b, http.MethodGet, "/tasks/"+v.TaskID, alice, ""); status != http.StatusOK {
		t.Errorf("alice GET her task without the Bearer prefix = %d, want 200", status)
	}
	// A Cognito-style access token: no aud, client_id names the client.
	bob := is.token(t, is.key, map[string]any{"sub": "bob", "client_id": "client-1", "scope": "openid email", "token_use": "access"})
	if status, body := call(t, b, http.MethodGet, "/tasks/"+v.TaskID, "Bearer "+bob, ""); status != http.StatusNotFound {
		t.Errorf("bob GET alice's task = %d %s, want 404", status, body)
	}
	// The context API Gateway would pass for bob: string claims and the
	// scopes of his token.
	az, err := local.NewJWTAuthorizer(t.Context(), is.srv.URL, []string{"client-1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	jc, err := az.Authorize(t.Context(), "Bearer "+bob)
	if err != nil {
		t.Fatalf("Authorize(bob): %v", err)
	}
	if jc.Claims["sub"] != "bob" || jc.Claims["token_use"] != "access" || jc.Claims["iss"] != is.srv.URL || strings.Join(jc.Scopes, " ") != "openid email" {
		t.Errorf("bob's authorizer context: claims %v scopes %v", jc.Claims, jc.Scopes)
	}
	// bob's same Idempotency-Key is his own task, not alice's.
	status, body = call(t, b, http.MethodPost, "/tasks", "Bearer "+bob, "k1")
	var bv taskView
	_ = json.Unmarshal([]byte(body), &bv)
	if status != http.StatusAccepted || bv.TaskID == v.TaskID {
		t.Errorf("bob POST with alice's key = %d (task %s, alice's %s), want 202 and another task", status, bv.TaskID, v.TaskID)
	}

	// Public routes need no token; /auth/config names the issuer.
	if status, _ := call(t, b, http.MethodGet, "/", "", ""); status != http.StatusOK {
		t.Errorf("GET / without a token = %d, want 200", status)
	}
	status, body = call(t, b, http.MethodGet, "/auth/config", "", "")
	var cfg map[string]string
	_ = json.Unmarshal([]byte(body), &cfg)
	if status != http.StatusOK || cfg["auth_mode"] != "jwt" || cfg["issuer"] != is.srv.URL || cfg["client_id"] != "client-1" {
		t.Errorf("GET /auth/config = %d %s", status, body)
	}
	// A CORS preflight passes the authorizer, as API Gateway lets it.
	if status, _ := call(t, b, http.MethodOptions, "/tasks", "", ""); status == http.StatusUnauthorized {
		t.Errorf("OPTIONS /tasks = 401, want the handler's answer")
	}
}
