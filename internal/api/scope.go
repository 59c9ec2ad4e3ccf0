package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Anonymous is the scope of callers without an authorizer (local runs, or a
// deployment without one).
const Anonymous = "anonymous"

// ErrNoIdentity is returned by CallerScope for an authorizer context that
// names no caller (for example a JWT without a sub claim). Treating such a
// caller as anonymous would let unrelated callers share tasks.
var ErrNoIdentity = errors.New("api: authorizer context has no caller identity")

// CallerScope returns the caller's scope from API Gateway's authorizer
// context: "jwt:<sub>", an IAM principal's scope (iamScope),
// "lambda:<sub or principalId>", or Anonymous without an authorizer.
func CallerScope(rc events.APIGatewayV2HTTPRequestContext) (string, error) {
	a := rc.Authorizer
	if a == nil {
		return Anonymous, nil
	}
	switch {
	case a.JWT != nil:
		if sub := a.JWT.Claims["sub"]; sub != "" {
			return "jwt:" + sub, nil
		}
		return "", ErrNoIdentity
	case a.IAM != nil:
		return iamScope(a.IAM.UserARN, a.IAM.CallerID)
	case a.Lambda != nil:
		for _, k := range []string{"sub", "principalId"} {
			if s, ok := a.Lambda[k].(string); ok && s != "" {
				return "lambda:" + s, nil
			}
		}
		return "", ErrNoIdentity
	}
	return Anonymous, nil
}

// noIdentityDetail is the 401's detail for CallerScope's error.
func noIdentityDetail(err error) string {
	const none = "The authorizer context names no caller (no JWT sub claim, IAM caller or Lambda authorizer principal)."
	if err == nil || err == ErrNoIdentity {
		return none
	}
	return "The authorizer context names no caller this API can scope tasks to: " + strings.TrimPrefix(err.Error(), ErrNoIdentity.Error()+": ") + "."
}

// iamScope is an IAM caller's scope, made only of what the caller cannot
// choose:
//
//   - an assumed role (arn:P:sts::ACCT:assumed-role/ROLE/SESSION): the role,
//     "iam:arn:P:iam::ACCT:role/ROLE". The session name is chosen by whoever
//     assumes the role, so it tells nobody apart: every principal allowed to
//     assume the role shares its scope. (The ARN drops the role's path; a
//     role's name is unique in its account.)
//   - an IAM user or the account root (arn:P:iam::…): "iam:<userArn>".
//   - a federated user (arn:P:sts::ACCT:federated-user/NAME) is refused: its
//     name is chosen by whichever IAM user requested its credentials.
//
// Without a userArn the caller id is used: an IAM user's unique id
// (AIDA…), or a role's (AROA…) with the ":SESSION" after it dropped.
func iamScope(userARN, callerID string) (string, error) {
	if userARN == "" {
		id, session, hasSession := strings.Cut(callerID, ":")
		switch {
		case id == "":
		case !hasSession:
			return "iam:" + id, nil
		case strings.HasPrefix(id, "AROA") && session != "":
			return "iam:" + id, nil
		}
		return "", fmt.Errorf("%w: IAM caller id %q is no IAM user's or role's", ErrNoIdentity, clip(callerID, 64))
	}
	parts := strings.SplitN(userARN, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[4] == "" {
		return "", fmt.Errorf("%w: IAM caller %q is not an ARN", ErrNoIdentity, clip(userARN, 128))
	}
	partition, service, account, resource := parts[1], parts[2], parts[4], parts[5]
	switch service {
	case "iam":
		return "iam:" + userARN, nil
	case "sts":
		seg := strings.Split(resource, "/")
		if len(seg) == 3 && seg[0] == "assumed-role" && seg[1] != "" && seg[2] != "" {
			return "iam:arn:" + partition + ":iam::" + account + ":role/" + seg[1], nil
		}
	}
	return "", fmt.Errorf("%w: IAM caller %q is neither an IAM user nor an assumed role (a federated user's name is chosen by its caller)", ErrNoIdentity, clip(userARN, 128))
}
