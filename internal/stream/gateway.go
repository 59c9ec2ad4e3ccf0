package stream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Route keys of the WebSocket API (route selection: $request.body.action).
const (
	RouteConnect    = "$connect"
	RouteDisconnect = "$disconnect"
	RouteSubscribe  = ActionSubscribe
	RouteDefault    = "$default"
)

// Tasks reads a task to check whose it is: (*ledger.Ledger).Get. A
// function rather than an interface, so the template's static check of
// what each function calls (internal/templatetest) sees this one call.
type Tasks func(ctx context.Context, taskID string) (*ledger.Task, error)

// Gateway is the WebSocket API's route handler ($connect, subscribe,
// $disconnect, $default), one Lambda function in AWS and called by the
// emulated gateway under make run.
type Gateway struct {
	Table *Table
	Tasks Tasks
	// RequireIdentity refuses callers without an identity (auth modes jwt
	// and iam) instead of scoping them api.Anonymous.
	RequireIdentity bool
	Log             *slog.Logger
}

// Handle answers one route invocation. The subscribe and $default routes
// have a route response: the body returned is sent to the client (a
// SubscribedFrame or an ErrorFrame).
func (g *Gateway) Handle(ctx context.Context, req events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
	rc := req.RequestContext
	switch rc.RouteKey {
	case RouteConnect:
		return g.connect(ctx, req)
	case RouteDisconnect:
		if err := g.Table.Disconnect(ctx, rc.ConnectionID); err != nil {
			g.log().WarnContext(ctx, "stream: disconnect cleanup failed; the items expire by TTL", "error", err.Error())
		}
		return events.APIGatewayProxyResponse{StatusCode: http.StatusOK}, nil
	case RouteSubscribe:
		return g.subscribe(ctx, req), nil
	}
	return frame(ErrorFrame{Error: CodeBadMessage, Detail: `the only message is {"action":"subscribe","task_id":"..."}`}), nil
}

func (g *Gateway) connect(ctx context.Context, req events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
	scope, err := Scope(req.RequestContext, g.RequireIdentity)
	if err != nil {
		return events.APIGatewayProxyResponse{StatusCode: http.StatusUnauthorized}, nil
	}
	if err := g.Table.Connect(ctx, req.RequestContext.ConnectionID, scope); err != nil {
		g.log().ErrorContext(ctx, "stream: connect not recorded", "error", err.Error())
		return events.APIGatewayProxyResponse{StatusCode: http.StatusServiceUnavailable}, nil
	}
	resp := events.APIGatewayProxyResponse{StatusCode: http.StatusOK}
	// A browser that offered subprotocols fails the handshake unless one
	// is selected: answer ours, never the bearer one.
	if offersSubprotocol(header(req.Headers, "Sec-WebSocket-Protocol")) {
		resp.Headers = map[string]string{"Sec-WebSocket-Protocol": Subprotocol}
	}
	return resp, nil
}

func (g *Gateway) subscribe(ctx context.Context, req events.APIGatewayWebsocketProxyRequest) events.APIGatewayProxyResponse {
	sub, err := ParseSubscribe([]byte(req.Body))
	if err != nil {
		return frame(ErrorFrame{Error: CodeBadMessage, Detail: err.Error()})
	}
	scope, err := Scope(req.RequestContext, g.RequireIdentity)
	if err != nil {
		return frame(ErrorFrame{Error: CodeTaskNotFound, TaskID: sub.TaskID, Detail: "no task with this id is yours"})
	}
	t, err := g.Tasks(ctx, sub.TaskID)
	switch {
	case errors.Is(err, ledger.ErrNotFound) || (err == nil && t.Scope != scope):
		// Another caller's task is answered as one that does not exist,
		// as GET /tasks/{id} answers it.
		return frame(ErrorFrame{Error: CodeTaskNotFound, TaskID: sub.TaskID, Detail: "no task with this id is yours"})
	case err != nil:
		g.log().ErrorContext(ctx, "stream: subscribe: reading the task failed", "task_id", sub.TaskID, "error", err.Error())
		return frame(ErrorFrame{Error: CodeUnavailable, TaskID: sub.TaskID, Detail: "try again"})
	}
	switch err := g.Table.Subscribe(ctx, req.RequestContext.ConnectionID, sub.TaskID); {
	case errors.Is(err, ErrTooManySubscriptions), errors.Is(err, ErrNotConnected):
		return frame(ErrorFrame{Error: CodeBadMessage, TaskID: sub.TaskID, Detail: err.Error()})
	case err != nil:
		g.log().ErrorContext(ctx, "stream: subscribe not recorded", "task_id", sub.TaskID, "error", err.Error())
		return frame(ErrorFrame{Error: CodeUnavailable, TaskID: sub.TaskID, Detail: "try again"})
	}
	return frame(SubscribedFrame{Subscribed: sub.TaskID})
}

func frame(v any) events.APIGatewayProxyResponse {
	b, _ := json.Marshal(v)
	return events.APIGatewayProxyResponse{StatusCode: http.StatusOK, Body: string(b)}
}

// Scope is the caller scope of a WebSocket request, by the HTTP API's
// rules (api.CallerScope): the authorizer context's sub claim (the
// WebSocket authorizer passes the JWT's sub) gives "jwt:<sub>"; an IAM
// caller ($connect with AWS_IAM) its role or user; neither gives
// api.Anonymous — unless requireIdentity (auth mode jwt or iam), when it
// is api.ErrNoIdentity.
func Scope(rc events.APIGatewayWebsocketProxyRequestContext, requireIdentity bool) (string, error) {
	if m, ok := rc.Authorizer.(map[string]any); ok {
		sub, _ := m["sub"].(string)
		return api.CallerScope(events.APIGatewayV2HTTPRequestContext{Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}}}})
	}
	if id := rc.Identity; id.UserArn != "" || id.Caller != "" {
		return api.CallerScope(events.APIGatewayV2HTTPRequestContext{Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: id.UserArn, CallerID: id.Caller}}})
	}
	if requireIdentity {
		return "", api.ErrNoIdentity
	}
	return api.Anonymous, nil
}

func offersSubprotocol(h string) bool {
	for _, p := range strings.Split(h, ",") {
		if strings.TrimSpace(p) == Subprotocol {
			return true
		}
	}
	return false
}

func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func (g *Gateway) log() *slog.Logger {
	if g.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Log
}

// Verifier validates a bearer token and returns its claims as API Gateway
// renders them (every value a string).
type Verifier interface {
	Verify(ctx context.Context, token string) (map[string]string, error)
}

// Authorizer is the $connect route's Lambda REQUEST authorizer: it reads
// the JWT a browser offers as the subprotocol "bearer.<JWT>" (browsers
// cannot set an Authorization header on a WebSocket; a query parameter
// would put the token in access logs and proxies' logs), validates it as
// the HTTP API's JWT authorizer does, and passes the sub claim on as the
// context every later route invocation of the connection sees. The token
// is never logged.
type Authorizer struct {
	Verifier Verifier
	Log      *slog.Logger
}

// ErrUnauthorized is what API Gateway turns into a 401: the error message
// must be exactly "Unauthorized".
var ErrUnauthorized = errors.New("Unauthorized")

// Handle answers one $connect authorization.
func (a *Authorizer) Handle(ctx context.Context, req events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	sub, err := a.Authorize(ctx, header(req.Headers, "Sec-WebSocket-Protocol"))
	if err != nil {
		return events.APIGatewayCustomAuthorizerResponse{}, ErrUnauthorized
	}
	return events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: sub,
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Action: []string{"execute-api:Invoke"}, Effect: "Allow", Resource: []string{req.MethodArn}}}},
		Context: map[string]any{"sub": sub},
	}, nil
}

// Authorize validates the bearer token of a Sec-WebSocket-Protocol header
// value and returns its sub claim. The error says why (never the token).
func (a *Authorizer) Authorize(ctx context.Context, protocols string) (string, error) {
	tok := BearerFromProtocols(protocols)
	if tok == "" {
		return "", errors.New("no bearer subprotocol")
	}
	claims, err := a.Verifier.Verify(ctx, tok)
	if err == nil && claims["sub"] == "" {
		err = errors.New("token has no sub claim")
	}
	if err != nil {
		if a.Log != nil {
			a.Log.InfoContext(ctx, "stream: WebSocket authorizer refused a connection", "reason", err.Error())
		}
		return "", err
	}
	return claims["sub"], nil
}
