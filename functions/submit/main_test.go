package main

import (
	"context"
	"strings"
	"testing"
)

// Not parallel: t.Setenv changes the process environment.
func TestBuildRequiresEnvironment(t *testing.T) {
	for _, missing := range []string{"TASKS_TABLE", "REVIEW_TABLE", "TASK_QUEUE_URL"} {
		t.Run(missing, func(t *testing.T) {
			t.Setenv("AWS_REGION", "us-east-1")
			for _, k := range []string{"TASKS_TABLE", "REVIEW_TABLE", "TASK_QUEUE_URL"} {
				t.Setenv(k, "x")
			}
			t.Setenv(missing, "")
			_, err := build(context.Background())
			if err == nil || !strings.Contains(err.Error(), missing) {
				t.Fatalf("build without %s: %v", missing, err)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("TASKS_TABLE", "tasks")
	t.Setenv("REVIEW_TABLE", "review")
	t.Setenv("TASK_QUEUE_URL", "http://127.0.0.1:1/000000000000/q")
	t.Setenv("ALLOWED_ORIGINS", "https://app.example.com, http://localhost:8080")
	h, err := build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Ledger == nil || h.Dispatch == nil || h.Metrics == nil || len(h.AllowedOrigins) != 2 {
		t.Fatalf("handler %+v", h)
	}
	if got := h.Ledger.Config(); got.TasksTable != "tasks" || got.ReviewTable != "review" {
		t.Fatalf("ledger config %+v", got)
	}
}
