package api

import (
	"encoding/json"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultScopes are the OpenID Connect scopes the page asks for when
// AuthConfig.Scopes is empty.
const DefaultScopes = "openid email profile"

// AuthConfig is how the API authenticates its callers, as the page needs to
// know it (GET /auth/config). Mode is "jwt" (an OpenID Connect issuer;
// Issuer and ClientID name it), "iam" (SigV4; the page cannot sign in) or
// "none" (no authorizer: every caller is anonymous).
type AuthConfig struct {
	Mode     string
	Issuer   string
	ClientID string
	Scopes   string
}

// authConfigBody is the JSON of GET /auth/config.
type authConfigBody struct {
	AuthMode              string `json:"auth_mode"`
	Issuer                string `json:"issuer"`
	ClientID              string `json:"client_id"`
	Scopes                string `json:"scopes"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
}

// authConfig answers GET /auth/config: public settings only (no secret
// exists: the page's app client is public).
func (h *Handler) authConfig() events.APIGatewayV2HTTPResponse {
	mode := h.Auth.Mode
	if mode == "" {
		mode = "none"
	}
	scopes := h.Auth.Scopes
	if scopes == "" {
		scopes = DefaultScopes
	}
	b, _ := json.Marshal(authConfigBody{AuthMode: mode, Issuer: h.Auth.Issuer, ClientID: h.Auth.ClientID, Scopes: scopes})
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
