// Command submit is the HTTP API Lambda (API Gateway HTTP API, payload 2.0):
// POST /tasks, GET /tasks/{id}, POST /tasks/{id}/regenerate,
// POST /tasks/{id}/cancel and POST /tasks/{id}/approve|reject|withdraw. The logic lives in internal/api; this file reads
// the environment, builds the dependencies and starts the Lambda runtime.
//
// Environment: TASKS_TABLE, REVIEW_TABLE, WATCH_TABLE (each submit puts
// its task's watch item there first), TASK_QUEUE_URL (required),
// TASK_ID_KEY_SECRET_ARN (required: the Secrets Manager secret task ids are
// derived with, read once at init), AUTH_MODE (required: jwt, iam or none)
// with OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_AUTHORIZATION_ENDPOINT (what GET
// /auth/config tells the page), STREAM_URL (the WebSocket API of
// streamed replies, advertised as stream_url; empty: none), ALLOWED_ORIGINS (comma-separated CORS
// allow-list; "*" allows any; empty disables CORS), PAYLOAD_BUCKET (the S3
// claim-check bucket for inputs above 4 KiB; unset keeps them inline), APPROVER_CLAIM,
// APPROVER_CLAIM_VALUE and ALLOW_SELF_APPROVAL (api.ApprovalPolicy),
// PROVIDER, PROVIDER_MODEL and PROVIDER_ADMISSION (the worker's provider,
// model and admission limits, read by lambdaenv.LoadProvider as the worker
// reads them: a generate task the worker could never run is refused with
// 422 — api.ProviderProfile; no provider key or secret is read),
// LOG_LEVEL (debug|info|warn|error).
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func main() {
	log := logging.FromEnv()
	h, err := build(context.Background())
	if err != nil {
		lambdaenv.Exit(log, "submit", err)
	}
	h.Log = log
	lambda.Start(h.Handle)
}

func build(ctx context.Context) (*api.Handler, error) {
	auth, err := api.ParseAuthConfig(os.Getenv("AUTH_MODE"), os.Getenv("OIDC_ISSUER"), os.Getenv("OIDC_CLIENT_ID"), os.Getenv("OIDC_AUTHORIZATION_ENDPOINT"))
	if err != nil {
		return nil, err
	}
	// The WebSocket API of streamed replies, advertised as stream_url.
	if auth.StreamURL = os.Getenv("STREAM_URL"); auth.StreamURL != "" && !strings.HasPrefix(auth.StreamURL, "wss://") {
		return nil, fmt.Errorf("STREAM_URL=%q: want a wss:// URL", auth.StreamURL)
	}
	approvals, err := api.ParseApprovalPolicy(os.Getenv("APPROVER_CLAIM"), os.Getenv("APPROVER_CLAIM_VALUE"), os.Getenv("ALLOW_SELF_APPROVAL"))
	if err != nil {
		return nil, err
	}
	directDeliver, err := api.ParseDirectDeliver(os.Getenv("DIRECT_DELIVER"))
	if err != nil {
		return nil, err
	}
	b, err := lambdaenv.Load(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	key, err := lambdaenv.TaskIDKey(ctx, secretsmanager.NewFromConfig(b.AWS), os.Getenv("TASK_ID_KEY_SECRET_ARN"))
	if err != nil {
		return nil, err
	}
	cfg := b.Ledger.Config()
	cfg.IDKey = key
	led, err := ledger.New(awsclient.DynamoDB(b.AWS), cfg)
	if err != nil {
		return nil, err
	}
	sp, err := lambdaenv.LoadSpend(b, os.Getenv)
	if err != nil {
		return nil, err
	}
	payloads, err := lambdaenv.Payloads(b.AWS, os.Getenv)
	if err != nil {
		return nil, err
	}
	dests, err := lambdaenv.DestinationChecker(os.Getenv)
	if err != nil {
		return nil, err
	}
	notify, err := lambdaenv.Notifications(os.Getenv, dests) // TASKLEDGER_NOTIFICATIONS
	if err != nil {
		return nil, err
	}
	// The worker's provider as the worker reads it (no key, no timeout):
	// what a task is checked against before it is recorded.
	pp, err := lambdaenv.LoadProvider(provider.ModelFromEnv(os.Getenv), os.Getenv)
	if err != nil {
		return nil, err
	}
	h := &api.Handler{
		Ledger:         led,
		Payloads:       payloads,
		Auth:           auth,
		Approvals:      approvals,
		DirectDeliver:  directDeliver,
		Destinations:   dests,
		Notify:         notify,
		Dispatch:       &dispatch.Sender{SQS: awsclient.SQS(b.AWS), QueueURL: b.TaskQueueURL},
		Metrics:        metrics.NewWriter(os.Stdout),
		AllowedOrigins: api.ParseOrigins(os.Getenv("ALLOWED_ORIGINS")),
		Provider: &api.ProviderProfile{Name: pp.Config.Name, Model: pp.Model,
			AcceptsDocuments: pp.Config.AcceptsDocuments(), TokensPerMinute: pp.TokensPerMinute()},
	}
	if sp != nil {
		h.Budgets, h.Quotas = sp.Budgets, sp.Quotas
	}
	return h, nil
}
