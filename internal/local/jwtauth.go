package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/taskledger/taskledger/internal/api"
)

// JWTAuthorizer emulates an API Gateway HTTP API JWT authorizer in front of
// a handler: the bearer token in Authorization must be a JWT signed by a
// key of the issuer's JWKS (found through its discovery document), with
// iss = Issuer, an aud that names one of Audience (or, when aud is absent,
// a client_id that does — Cognito access tokens), and exp/nbf/iat that
// hold now. Anything else gets API Gateway's 401 {"message":"Unauthorized"}
// and never reaches the handler. An accepted token's claims and scopes
// become the v2 request context's authorizer.jwt, as API Gateway puts them
// there, so api.CallerScope gives "jwt:<sub>".
//
// Signature, issuer and time checks are go-oidc's (github.com/coreos/go-oidc/v3);
// keys are fetched from jwks_uri and refreshed when an unknown kid appears.
type JWTAuthorizer struct {
	issuer   string
	audience []string
	verifier *oidc.IDTokenVerifier
	log      *slog.Logger
}

// NewJWTAuthorizer reads issuer's discovery document
// (issuer + "/.well-known/openid-configuration") and returns an authorizer
// for tokens of that issuer for audience. client is the HTTP client for
// discovery and JWKS (nil: a default with a timeout).
func NewJWTAuthorizer(ctx context.Context, issuer string, audience []string, client *http.Client, log *slog.Logger) (*JWTAuthorizer, error) {
	if issuer == "" {
		return nil, errors.New("local: JWT authorizer: no issuer")
	}
	if len(audience) == 0 {
		return nil, errors.New("local: JWT authorizer: no audience (the app client id)")
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	// The provider keeps this context for JWKS refreshes: not cancelled
	// with Start's.
	octx := oidc.ClientContext(context.WithoutCancel(ctx), client)
	dctx, cancel := context.WithTimeout(octx, 15*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, issuer)
	if err != nil {
		return nil, fmt.Errorf("local: JWT authorizer: discovery of %s: %w", issuer, err)
	}
	return &JWTAuthorizer{
		issuer:   issuer,
		audience: audience,
		// aud/client_id is checked below, the API Gateway way.
		verifier: p.Verifier(&oidc.Config{SkipClientIDCheck: true}),
		log:      log,
	}, nil
}

// Wrap returns next behind the authorizer. OPTIONS requests pass
// unauthenticated, as API Gateway lets CORS preflights through.
func (a *JWTAuthorizer) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		jwt, err := a.Authorize(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			if a.log != nil {
				a.log.InfoContext(r.Context(), "local: JWT authorizer rejected a request", "path", r.URL.Path, "reason", err.Error())
			}
			unauthorized(w)
			return
		}
		auth := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: jwt}
		next.ServeHTTP(w, r.WithContext(api.WithAuthorizer(r.Context(), auth)))
	})
}

// ErrNoToken is returned by Authorize for a request without a token.
var ErrNoToken = errors.New("no bearer token")

// Authorize validates the Authorization header value (a JWT, with or
// without the "Bearer " prefix, as API Gateway accepts it) and returns the
// authorizer.jwt context API Gateway would pass on. The error says why a
// token was refused (for logs; never the token itself).
func (a *JWTAuthorizer) Authorize(ctx context.Context, header string) (*events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription, error) {
	raw := strings.TrimSpace(header)
	if len(raw) > 7 && strings.EqualFold(raw[:7], "bearer ") {
		raw = strings.TrimSpace(raw[7:])
	}
	if raw == "" {
		return nil, ErrNoToken
	}
	tok, err := a.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	if !a.audienceOK(tok.Audience, claims["client_id"]) {
		return nil, errors.New("neither aud nor client_id names a configured audience")
	}
	if iat, ok := claims["iat"].(float64); ok && time.Unix(int64(iat), 0).After(time.Now().Add(time.Minute)) {
		return nil, errors.New("iat is in the future")
	}
	return &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
		Claims: ClaimStrings(claims),
		Scopes: scopes(claims),
	}, nil
}

// audienceOK applies API Gateway's rule: aud, when present, must contain a
// configured audience; without aud, client_id must be one.
func (a *JWTAuthorizer) audienceOK(aud []string, clientID any) bool {
	if len(aud) > 0 {
		for _, v := range aud {
			if slices.Contains(a.audience, v) {
				return true
			}
		}
		return false
	}
	s, ok := clientID.(string)
	return ok && s != "" && slices.Contains(a.audience, s)
}

// ClaimStrings renders JWT claims the way API Gateway passes them in
// authorizer.jwt.claims (payload 2.0): every value a string; strings as
// they are, numbers and booleans in their JSON form, arrays as
// "[a b c]", objects as JSON.
func ClaimStrings(claims map[string]any) map[string]string {
	out := make(map[string]string, len(claims))
	for k, v := range claims {
		out[k] = claimString(v)
	}
	return out
}

func claimString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = claimString(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case float64:
		b, _ := json.Marshal(x)
		return string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// scopes is the token's scope claim ("a b c", or an scp array) as a list;
// nil without one.
func scopes(claims map[string]any) []string {
	switch s := claims["scope"].(type) {
	case string:
		if f := strings.Fields(s); len(f) > 0 {
			return f
		}
	}
	if arr, ok := claims["scp"].([]any); ok {
		var out []string
		for _, e := range arr {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// unauthorized writes API Gateway's answer to a request its JWT authorizer
// refused.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", "Bearer")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"message":"Unauthorized"}`))
}
