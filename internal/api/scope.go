package api

import (
	"errors"

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
// context: "jwt:<sub>", "iam:<userArn>" (or "iam:<callerId>" without an
// ARN), "lambda:<sub or principalId>", or Anonymous without an authorizer.
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
		if a.IAM.UserARN != "" {
			return "iam:" + a.IAM.UserARN, nil
		}
		if a.IAM.CallerID != "" {
			return "iam:" + a.IAM.CallerID, nil
		}
		return "", ErrNoIdentity
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
