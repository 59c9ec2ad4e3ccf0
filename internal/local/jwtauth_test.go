package local

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// Claims reach the handler as API Gateway renders them: all strings.
func TestClaimStrings(t *testing.T) {
	t.Parallel()
	var claims map[string]any
	if err := json.Unmarshal([]byte(`{"sub":"alice","exp":1700000000,"email_verified":true,"aud":["a","b"],"cognito:groups":["ops"],"x":{"k":1}}`), &claims); err != nil {
		t.Fatal(err)
	}
	got := ClaimStrings(claims)
	want := map[string]string{"sub": "alice", "exp": "1700000000", "email_verified": "true", "aud": "[a b]", "cognito:groups": "[ops]", "x": `{"k":1}`}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("claim %s = %q, want %q", k, got[k], v)
		}
	}
	if s := scopes(map[string]any{"scope": "openid  email"}); !slices.Equal(s, []string{"openid", "email"}) {
		t.Errorf("scopes from scope = %v", s)
	}
	if s := scopes(map[string]any{"scp": []any{"a", "b"}}); !slices.Equal(s, []string{"a", "b"}) {
		t.Errorf("scopes from scp = %v", s)
	}
	if s := scopes(map[string]any{}); s != nil {
		t.Errorf("scopes without a claim = %v, want nil", s)
	}
}

// aud wins when present; client_id counts only without aud (API Gateway).
func TestAudienceRule(t *testing.T) {
	t.Parallel()
	a := &JWTAuthorizer{audience: []string{"c1", "c2"}}
	for _, tc := range []struct {
		aud      []string
		clientID any
		ok       bool
	}{
		{[]string{"c1"}, nil, true},
		{[]string{"x", "c2"}, nil, true},
		{[]string{"x"}, "c1", false},
		{nil, "c1", true},
		{nil, "x", false},
		{nil, nil, false},
		{nil, "", false},
	} {
		if got := a.audienceOK(tc.aud, tc.clientID); got != tc.ok {
			t.Errorf("audienceOK(%v, %v) = %t, want %t", tc.aud, tc.clientID, got, tc.ok)
		}
	}
}

// A misconfigured issuer fails Start's construction with a clear error,
// rather than refusing every request later.
func TestNewJWTAuthorizerErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := NewJWTAuthorizer(ctx, "", []string{"c"}, nil, nil); err == nil || !strings.Contains(err.Error(), "no issuer") {
		t.Errorf("no issuer: %v", err)
	}
	if _, err := NewJWTAuthorizer(ctx, "http://127.0.0.1:1", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "no audience") {
		t.Errorf("no audience: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"https://someone-else.example","jwks_uri":"https://someone-else.example/jwks"}`))
	}))
	defer srv.Close()
	if _, err := NewJWTAuthorizer(ctx, srv.URL, []string{"c"}, nil, nil); err == nil || !strings.Contains(err.Error(), "did not match") {
		t.Errorf("issuer mismatch: %v", err)
	}
}
