package web_test

import (
	"testing"

	"github.com/taskledger/taskledger/internal/local"
)

// TestBrowserNoSignInLoopWhenTheAPIRefusesFreshTokens: an API whose JWT
// authorizer refuses every token the page gets (its audience names another
// client — a misconfiguration, or a deploy that changed it) must not make
// the page bounce between itself and the issuer. web/test/signinloop.mjs
// signs in once with a click, waits for the page to say the API refused a
// token it never accepted, and then watches for a further automatic
// authorization request: each such redirect is a new page load, so "at most
// one automatic sign-in per page load" alone does not stop a loop.
func TestBrowserNoSignInLoopWhenTheAPIRefusesFreshTokens(t *testing.T) {
	t.Parallel()
	// The page signs in as the script's client; the authorizer accepts
	// only another client's tokens, so every token the page gets is
	// refused.
	var rep report
	runWithIssuer(t, "signinloop.mjs", func(iss issuerLine) local.Options {
		return local.Options{OIDCIssuer: iss.Issuer, OIDCAudience: []string{"another-client"}, OIDCClientID: iss.ClientID}
	}, &rep)
}
