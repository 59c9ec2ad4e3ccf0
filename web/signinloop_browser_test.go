package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
	node := needBrowser(t)
	if _, err := os.Stat(filepath.Join("test", "node_modules", "oauth2-mock-server", "package.json")); err != nil {
		missing(t, "web/test/node_modules/oauth2-mock-server not installed (cd web/test && npm ci)")
	}
	ctx := browserCtx(t)

	cmd := exec.CommandContext(ctx, node, filepath.Join("test", "signinloop.mjs"), shotDir(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start signinloop.mjs: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	out := bufio.NewReader(stdoutPipe)
	first, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("signinloop.mjs printed no issuer line (%v); stderr:\n%s", err, stderr.String())
	}
	var iss struct {
		Issuer   string `json:"issuer"`
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal([]byte(first), &iss); err != nil || iss.Issuer == "" || iss.ClientID == "" {
		t.Fatalf("issuer line %q: %v", first, err)
	}

	// The page signs in as iss.ClientID; the authorizer accepts only
	// another client's tokens, so every token the page gets is refused.
	s := startStack(ctx, t, local.Options{
		OIDCIssuer:   iss.Issuer,
		OIDCAudience: []string{"another-client"},
		OIDCClientID: iss.ClientID,
	})
	if _, err := io.WriteString(stdin, s.URL+"\n"); err != nil {
		t.Fatalf("write stack URL: %v", err)
	}
	_ = stdin.Close()

	rest, _ := io.ReadAll(out)
	runErr := cmd.Wait()
	t.Logf("signinloop.mjs stderr:\n%s", stderr.String())
	var rep report
	readReport(t, "signinloop.mjs", rest, runErr, &rep)
}
