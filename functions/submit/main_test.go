package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Not parallel: t.Setenv changes the process environment.
func TestBuildRequiresEnvironment(t *testing.T) {
	required := []string{"TASKS_TABLE", "REVIEW_TABLE", "WATCH_TABLE", "TASK_QUEUE_URL", "TASK_ID_KEY_SECRET_ARN", "AUTH_MODE"}
	for _, missing := range required {
		t.Run(missing, func(t *testing.T) {
			t.Setenv("AWS_REGION", "us-east-1")
			for _, k := range required {
				t.Setenv(k, "x")
			}
			t.Setenv("AUTH_MODE", "none")
			t.Setenv(missing, "")
			_, err := build(context.Background())
			if err == nil || !strings.Contains(err.Error(), missing) {
				t.Fatalf("build without %s: %v", missing, err)
			}
		})
	}
}

// TestBuild reads the task id key from a real secret (moto) and hands the
// handler the auth settings GET /auth/config reports.
func TestBuild(t *testing.T) {
	e := testenv.New(t, "moto")
	sm := secretsmanager.NewFromConfig(e.AWS)
	key := strings.Repeat("Ab3", 22)
	sec, err := sm.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{Name: aws.String(testenv.UniquePrefix() + "task-id-key"), SecretString: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", e.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("TASKS_TABLE", "tasks")
	t.Setenv("REVIEW_TABLE", "review")
	t.Setenv("WATCH_TABLE", "watch")
	t.Setenv("TASK_QUEUE_URL", "http://127.0.0.1:1/000000000000/q")
	t.Setenv("TASK_ID_KEY_SECRET_ARN", *sec.ARN)
	t.Setenv("AUTH_MODE", "jwt")
	t.Setenv("OIDC_ISSUER", "https://issuer.example.com")
	t.Setenv("OIDC_CLIENT_ID", "page-client")
	t.Setenv("ALLOWED_ORIGINS", "https://app.example.com, http://localhost:8080")
	h, err := build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Ledger == nil || h.Dispatch == nil || h.Metrics == nil || len(h.AllowedOrigins) != 2 {
		t.Fatalf("handler %+v", h)
	}
	if got := h.Ledger.Config(); got.TasksTable != "tasks" || got.ReviewTable != "review" || got.WatchTable != "watch" || string(got.IDKey) != key {
		t.Fatalf("ledger config %+v", got)
	}
	if h.Ledger.TaskID(api.Anonymous, "k") == ledger.TaskID(api.Anonymous, "k") {
		t.Fatal("task ids are not keyed")
	}
	if h.Auth != (api.AuthConfig{Mode: "jwt", Issuer: "https://issuer.example.com", ClientID: "page-client"}) {
		t.Fatalf("auth %+v", h.Auth)
	}
	if h.Provider == nil || *h.Provider != (api.ProviderProfile{Name: "simulated", Model: "simulated-1", AcceptsDocuments: true}) {
		t.Fatalf("provider profile %+v; want the simulated default, no admission", h.Provider)
	}
	t.Setenv("PROVIDER", "openai")
	t.Setenv("PROVIDER_MODEL", "gpt-x")
	t.Setenv("PROVIDER_ADMISSION", `{"models":{"gpt-x":{"requests_per_minute":10,"tokens_per_minute":150000}}}`)
	h, err = build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if *h.Provider != (api.ProviderProfile{Name: "openai", Model: "gpt-x", AcceptsDocuments: false, TokensPerMinute: 150000}) {
		t.Fatalf("provider profile %+v; want openai without documents, 150000 tokens per minute", h.Provider)
	}
	t.Setenv("PROVIDER_ADMISSION", `{"models":{"other":{"requests_per_minute":10,"tokens_per_minute":150000}}}`)
	if _, err := build(context.Background()); err == nil || !strings.Contains(err.Error(), "PROVIDER_ADMISSION has no limits") {
		t.Fatalf("admission without the model's limits: %v; want init to fail", err)
	}
	t.Setenv("PROVIDER", "")
	t.Setenv("PROVIDER_MODEL", "")
	t.Setenv("PROVIDER_ADMISSION", "")

	// DIRECT_DELIVER: unset is the template's default, ApproversOnly; a
	// value the template does not allow stops the function at init.
	if h.DirectDeliver != api.DirectDeliverApproversOnly {
		t.Fatalf("DirectDeliver without DIRECT_DELIVER = %q, want ApproversOnly", h.DirectDeliver)
	}
	t.Setenv("DIRECT_DELIVER", "Disabled")
	if h, err = build(context.Background()); err != nil || h.DirectDeliver != api.DirectDeliverDisabled {
		t.Fatalf("DIRECT_DELIVER=Disabled: %v, %q", err, h.DirectDeliver)
	}
	t.Setenv("DIRECT_DELIVER", "everyone")
	if _, err := build(context.Background()); err == nil || !strings.Contains(err.Error(), "DIRECT_DELIVER") {
		t.Fatalf("DIRECT_DELIVER=everyone: %v; want init to fail", err)
	}
	t.Setenv("DIRECT_DELIVER", "")

	t.Setenv("AUTH_MODE", "cognito")
	if _, err := build(context.Background()); err == nil || !strings.Contains(err.Error(), "AUTH_MODE") {
		t.Fatalf("AUTH_MODE=cognito (a template value, not a function value): %v", err)
	}
}
