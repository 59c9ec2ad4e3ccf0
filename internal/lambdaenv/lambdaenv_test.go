package lambdaenv

import (
	"context"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	env := map[string]string{"TASKS_TABLE": "tasks", "REVIEW_TABLE": "review", "WATCH_TABLE": "watch", "TASK_QUEUE_URL": "http://127.0.0.1:1/q"}
	b, err := Load(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if b.TasksTable != "tasks" || b.ReviewTable != "review" || b.WatchTable != "watch" || b.TaskQueueURL != "http://127.0.0.1:1/q" || b.Ledger == nil {
		t.Fatalf("base = %+v", b)
	}
	if c := b.Ledger.Config(); c.TasksTable != "tasks" || c.ReviewTable != "review" || c.WatchTable != "watch" {
		t.Fatalf("ledger config %+v", c)
	}
	for missing := range env {
		saved := env[missing]
		env[missing] = ""
		if _, err := Load(context.Background(), func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), missing) {
			t.Fatalf("Load without %s: %v", missing, err)
		}
		env[missing] = saved
	}
}
