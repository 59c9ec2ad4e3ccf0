package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

const acct = "123456789012"

func assumedRole(role, session string) reqOpt {
	return asIAM("arn:aws:sts::"+acct+":assumed-role/"+role+"/"+session, "AROAEXAMPLE"+role+":"+session)
}

// TestIAMScopeIsTheRoleNotTheSessionName: an assumed role's session name is
// chosen by whoever assumes the role, so it cannot tell callers apart.
// Every caller of one role shares one scope (the role's) — a caller who
// names their session after another's reads exactly what they could read
// anyway — and no session name reaches another role's scope.
func TestIAMScopeIsTheRoleNotTheSessionName(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(func(h *api.Handler) { h.Auth = api.AuthConfig{Mode: api.AuthIAM} }))
		resp := b.do(t, submitReq("k-role", body("dev's"), assumedRole("dev", "alice")))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		if want := ledger.TaskID("iam:arn:aws:iam::"+acct+":role/dev", "k-role"); id != want {
			t.Fatalf("task id %s, want the one of the role's scope %s", id, want)
		}
		// Another session of the same role: the same scope, stated as such.
		wantStatus(t, b.do(t, getReq(id, assumedRole("dev", "bob"))), http.StatusOK)
		if r := b.do(t, submitReq("k-role", body("dev's"), assumedRole("dev", "bob"))); r.StatusCode != http.StatusOK || r.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("the same key and payload from another session of the role: %d %v, want the 200 replay", r.StatusCode, r.Headers)
		}
		// Another role, whatever its session is named, is another scope.
		for _, s := range []string{"alice", "bob", "dev", "role-dev", "dev@example.com"} {
			wantProblem(t, b.do(t, getReq(id, assumedRole("admin", s))), http.StatusNotFound, api.TypeNotFound)
		}
		// An IAM user named like the role is not the role.
		wantProblem(t, b.do(t, getReq(id, asIAM("arn:aws:iam::"+acct+":user/dev", "AIDAEXAMPLE"))), http.StatusNotFound, api.TypeNotFound)
		// A federated user is named by whoever requested its credentials:
		// refused, saying so.
		p := wantProblem(t, b.do(t, getReq(id, asIAM("arn:aws:sts::"+acct+":federated-user/alice", acct+":alice"))), http.StatusUnauthorized, api.TypeUnauthenticated)
		if !strings.Contains(p.Detail, "federated user") {
			t.Errorf("a federated user's 401 says %q; want it to say why", p.Detail)
		}
		// Without a userArn, a role's caller id is "<role id>:<session>":
		// the session is dropped there too.
		noARN := b.do(t, submitReq("k-id", body("x"), asIAM("", "AROAXYZ:alice")))
		wantStatus(t, noARN, http.StatusAccepted)
		if r := b.do(t, submitReq("k-id", body("x"), asIAM("", "AROAXYZ:bob"))); r.StatusCode != http.StatusOK {
			t.Fatalf("another session of the role (caller id only): %d, want the 200 replay", r.StatusCode)
		}
	})
}

// TestCallerScopeOfIAMPrincipals: what each IAM principal's scope is, and
// which principals are refused because every part of their name is chosen
// by the caller.
func TestCallerScopeOfIAMPrincipals(t *testing.T) {
	t.Parallel()
	iam := func(arn, callerID string) events.APIGatewayV2HTTPRequestContext {
		return events.APIGatewayV2HTTPRequestContext{Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn, CallerID: callerID, AccountID: acct}}}
	}
	scopes := []struct{ arn, callerID, want string }{
		{"arn:aws:iam::" + acct + ":user/alice", "AIDA1", "iam:arn:aws:iam::" + acct + ":user/alice"},
		{"arn:aws:iam::" + acct + ":user/team/alice", "AIDA1", "iam:arn:aws:iam::" + acct + ":user/team/alice"},
		{"arn:aws:iam::" + acct + ":root", acct, "iam:arn:aws:iam::" + acct + ":root"},
		{"arn:aws:sts::" + acct + ":assumed-role/dev/alice", "AROA1:alice", "iam:arn:aws:iam::" + acct + ":role/dev"},
		{"arn:aws:sts::" + acct + ":assumed-role/dev/bob@example.com", "AROA1:bob@example.com", "iam:arn:aws:iam::" + acct + ":role/dev"},
		{"arn:aws-us-gov:sts::" + acct + ":assumed-role/dev/x", "AROA1:x", "iam:arn:aws-us-gov:iam::" + acct + ":role/dev"},
		{"", "AIDA1", "iam:AIDA1"},
		{"", "AROA1:alice", "iam:AROA1"},
	}
	for _, c := range scopes {
		got, err := api.CallerScope(iam(c.arn, c.callerID))
		if err != nil || got != c.want {
			t.Errorf("scope of %q / %q = %q, %v; want %q", c.arn, c.callerID, got, err, c.want)
		}
	}
	refused := []struct{ arn, callerID string }{
		{"arn:aws:sts::" + acct + ":federated-user/alice", acct + ":alice"}, // named by whoever called GetFederationToken
		{"arn:aws:sts::" + acct + ":assumed-role/dev", "AROA1:x"},
		{"arn:aws:sts::" + acct + ":assumed-role/dev/x/y", "AROA1:x"},
		{"arn:aws:sts::" + acct + ":assumed-role//x", "AROA1:x"},
		{"", acct + ":alice"}, // a federated user's caller id
		{"", ""},
	}
	for _, c := range refused {
		if got, err := api.CallerScope(iam(c.arn, c.callerID)); !errors.Is(err, api.ErrNoIdentity) {
			t.Errorf("scope of %q / %q = %q, %v; want ErrNoIdentity", c.arn, c.callerID, got, err)
		}
	}
}
