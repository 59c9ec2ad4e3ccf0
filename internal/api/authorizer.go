package api

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
)

type authorizerKey struct{}

// WithAuthorizer returns ctx carrying the authorizer context that
// NewHTTPHandler puts in the request's RequestContext.Authorizer, as API
// Gateway does after its authorizer accepted the caller. The local stack's
// JWT authorizer emulation (internal/local) attaches it.
func WithAuthorizer(ctx context.Context, a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) context.Context {
	return context.WithValue(ctx, authorizerKey{}, a)
}

func authorizerFrom(ctx context.Context) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	a, _ := ctx.Value(authorizerKey{}).(*events.APIGatewayV2HTTPRequestContextAuthorizerDescription)
	return a
}
