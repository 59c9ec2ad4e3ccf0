package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultScopes are the OpenID Connect scopes the page asks for when
// AuthConfig.Scopes is empty.
const DefaultScopes = "openid email profile"

// Auth modes, as GET /auth/config reports them and AUTH_MODE sets them.
const (
	// AuthJWT: a JWT authorizer (an OpenID Connect issuer, or the Cognito
	// user pool the template creates) in front of every /tasks route.
	AuthJWT = "jwt"
	// AuthIAM: SigV4-signed requests (AWS_IAM on every /tasks route); the
	// page cannot sign in.
	AuthIAM = "iam"
	// AuthNone: no authorizer, every caller is Anonymous. An explicit choice
	// the README and the page warn about.
	AuthNone = "none"
)

// AuthConfig is how the API authenticates its callers, as the page needs to
// know it (GET /auth/config). Everything in it is public: the page's OIDC
// client is a public client (authorization code + PKCE, no secret).
type AuthConfig struct {
	// Mode is AuthJWT, AuthIAM or AuthNone ("" is AuthNone).
	Mode string
	// Issuer and ClientID name the OIDC issuer and the page's client (jwt).
	Issuer   string
	ClientID string
	// Scopes the page requests (default DefaultScopes).
	Scopes string
	// AuthorizationEndpoint overrides the issuer's discovered one (the
	// Cognito hosted UI's /oauth2/authorize); usually empty.
	AuthorizationEndpoint string
	// StreamURL is the WebSocket API of streamed replies
	// (docs/streaming.md); "" when there is none.
	StreamURL string
}

// ParseAuthConfig validates the submit function's AUTH_MODE, OIDC_ISSUER,
// OIDC_CLIENT_ID and OIDC_AUTHORIZATION_ENDPOINT values: the mode must be
// one of the three, and jwt needs an https issuer and a client id.
func ParseAuthConfig(mode, issuer, clientID, authorizationEndpoint string) (AuthConfig, error) {
	a := AuthConfig{Mode: strings.TrimSpace(mode), Issuer: strings.TrimSpace(issuer), ClientID: strings.TrimSpace(clientID),
		AuthorizationEndpoint: strings.TrimSpace(authorizationEndpoint)}
	switch a.Mode {
	case AuthJWT:
		if !strings.HasPrefix(a.Issuer, "https://") || a.ClientID == "" {
			return AuthConfig{}, fmt.Errorf("AUTH_MODE=jwt needs OIDC_ISSUER (an https URL) and OIDC_CLIENT_ID")
		}
	case AuthIAM, AuthNone:
	default:
		return AuthConfig{}, fmt.Errorf("AUTH_MODE=%q: want jwt, iam or none", clip(a.Mode, 16))
	}
	if a.AuthorizationEndpoint != "" && !strings.HasPrefix(a.AuthorizationEndpoint, "https://") {
		return AuthConfig{}, fmt.Errorf("OIDC_AUTHORIZATION_ENDPOINT must be an https URL")
	}
	return a, nil
}

// requiresIdentity reports whether /tasks callers must come through an
// authorizer: with jwt or iam configured, a request without an authorizer
// context means a route was left open by mistake, and it is refused rather
// than served as Anonymous.
func (a AuthConfig) requiresIdentity() bool { return a.Mode == AuthJWT || a.Mode == AuthIAM }

// authConfigBody is the JSON of GET /auth/config.
type authConfigBody struct {
	AuthMode              string `json:"auth_mode"`
	Issuer                string `json:"issuer"`
	ClientID              string `json:"client_id"`
	Scopes                string `json:"scopes"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	StreamURL             string `json:"stream_url,omitempty"`
}

// authConfig answers GET /auth/config (servePublic routes it) with public
// settings only.
func (h *Handler) authConfig() events.APIGatewayV2HTTPResponse {
	a := h.Auth
	if a.Mode == "" {
		a.Mode = AuthNone
	}
	if a.Scopes == "" {
		a.Scopes = DefaultScopes
	}
	b, _ := json.Marshal(authConfigBody{AuthMode: a.Mode, Issuer: a.Issuer, ClientID: a.ClientID, Scopes: a.Scopes,
		AuthorizationEndpoint: a.AuthorizationEndpoint, StreamURL: a.StreamURL})
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusOK,
		Headers: map[string]string{
			"Content-Type":           "application/json",
			"Cache-Control":          "no-cache",
			"X-Content-Type-Options": "nosniff",
		},
		Body: string(b),
	}
}
