// Command stream is the WebSocket API's Lambda for streamed replies
// (docs/streaming.md): the $connect route's REQUEST authorizer (auth mode
// jwt) and the $connect, subscribe, $disconnect and $default routes. One
// function serves both: an authorizer event is told by its type
// ("REQUEST"), a route event by its requestContext.routeKey. The logic
// lives in internal/stream.
//
// Environment: CONNECTIONS_TABLE, TASKS_TABLE, REVIEW_TABLE, WATCH_TABLE,
// TASK_QUEUE_URL (required, as every function's; a subscribe reads the task to check it
// is the caller's); AUTH_MODE (jwt, iam or none, as
// the submit function's), with jwt OIDC_ISSUER and OIDC_AUDIENCE (comma
// separated: the authorizer's audience); LOG_LEVEL.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/stream"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background())
	if err != nil {
		lambdaenv.Exit(log, "stream", err)
	}
	h.gw.Log = log
	if h.authz != nil {
		h.authz.Log = log
	}
	lambda.Start(h.handle)
}

type handler struct {
	gw    *stream.Gateway
	authz *stream.Authorizer
}

func build(ctx context.Context) (*handler, error) {
	table := os.Getenv("CONNECTIONS_TABLE")
	if table == "" {
		return nil, lambdaenv.Missing("CONNECTIONS_TABLE")
	}
	b, err := lambdaenv.Load(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	ddb := awsclient.DynamoDB(b.AWS)
	h := &handler{gw: &stream.Gateway{Table: &stream.Table{DB: ddb, ConnectionsTable: table}, Tasks: b.Ledger.Get}}
	switch mode := os.Getenv("AUTH_MODE"); mode {
	case "jwt":
		v, err := stream.NewOIDCVerifier(ctx, os.Getenv("OIDC_ISSUER"), strings.Split(os.Getenv("OIDC_AUDIENCE"), ","))
		if err != nil {
			return nil, err
		}
		h.authz = &stream.Authorizer{Verifier: v}
		h.gw.RequireIdentity = true
	case "iam":
		h.gw.RequireIdentity = true
	case "none", "":
	default:
		return nil, fmt.Errorf("AUTH_MODE=%q: want jwt, iam or none", mode)
	}
	return h, nil
}

// handle dispatches an authorizer event or a route event.
func (h *handler) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Type           string `json:"type"`
		RequestContext struct {
			RouteKey string `json:"routeKey"`
		} `json:"requestContext"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("stream: not an API Gateway event")
	}
	if probe.Type == "REQUEST" {
		if h.authz == nil {
			return nil, stream.ErrUnauthorized
		}
		var req events.APIGatewayCustomAuthorizerRequestTypeRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, stream.ErrUnauthorized
		}
		return h.authz.Handle(ctx, req)
	}
	var req events.APIGatewayWebsocketProxyRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("stream: not a WebSocket route event")
	}
	return h.gw.Handle(ctx, req)
}
