package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCVerifier validates a JWT as API Gateway's JWT authorizer does, for
// the WebSocket $connect authorizer: signed by a key of the issuer's JWKS
// (found through its discovery document), iss = the issuer, exp/nbf/iat
// holding now, and an aud naming one of the audiences — or, without aud, a
// client_id that does (Cognito access tokens). Claims come back as API
// Gateway renders them (strings).
type OIDCVerifier struct {
	audience []string
	verifier *oidc.IDTokenVerifier
}

// NewOIDCVerifier reads issuer's discovery document and returns a verifier
// for tokens of that issuer for audience.
func NewOIDCVerifier(ctx context.Context, issuer string, audience []string) (*OIDCVerifier, error) {
	if issuer == "" || len(audience) == 0 {
		return nil, errors.New("stream: JWT verifier needs an issuer and an audience")
	}
	octx := oidc.ClientContext(context.WithoutCancel(ctx), &http.Client{Timeout: 10 * time.Second})
	dctx, cancel := context.WithTimeout(octx, 15*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, issuer)
	if err != nil {
		return nil, fmt.Errorf("stream: discovery of %s: %w", issuer, err)
	}
	return &OIDCVerifier{audience: audience, verifier: p.Verifier(&oidc.Config{SkipClientIDCheck: true})}, nil
}

// Verify implements Verifier.
func (v *OIDCVerifier) Verify(ctx context.Context, token string) (map[string]string, error) {
	tok, err := v.verifier.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	ok := false
	if len(tok.Audience) > 0 {
		for _, a := range tok.Audience {
			ok = ok || slices.Contains(v.audience, a)
		}
	} else if cid, _ := claims["client_id"].(string); cid != "" {
		ok = slices.Contains(v.audience, cid)
	}
	if !ok {
		return nil, errors.New("neither aud nor client_id names a configured audience")
	}
	if iat, isNum := claims["iat"].(float64); isNum && time.Unix(int64(iat), 0).After(time.Now().Add(time.Minute)) {
		return nil, errors.New("iat is in the future")
	}
	out := make(map[string]string, len(claims))
	for k, c := range claims {
		if s, isStr := c.(string); isStr {
			out[k] = s
			continue
		}
		b, _ := json.Marshal(c)
		out[k] = string(b)
	}
	return out, nil
}
