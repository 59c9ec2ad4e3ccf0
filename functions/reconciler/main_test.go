package main

import (
	"context"
	"strings"
	"testing"
)

func TestBuildFromEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"TASKS_TABLE": "tasks", "REVIEW_TABLE": "reviews", "WATCH_TABLE": "watch", "AWS_REGION": "us-east-1",
		"TASK_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "DEAD_LETTER_QUEUE_URL": "http://127.0.0.1:1/000000000000/dlq",
	}
	get := func(k string) string { return env[k] }
	h, err := build(context.Background(), get)
	if err != nil {
		t.Fatal(err)
	}
	if h.Ledger.Config().TasksTable != "tasks" || h.Ledger.Config().WatchTable != "watch" || h.DLQURL != env["DEAD_LETTER_QUEUE_URL"] || h.Dispatch.QueueURL != env["TASK_QUEUE_URL"] || h.Provider == nil || h.Provider.Name() != "simulated" {
		t.Fatalf("handler = %+v", h)
	}
	for _, k := range []string{"TASKS_TABLE", "REVIEW_TABLE", "WATCH_TABLE", "TASK_QUEUE_URL", "DEAD_LETTER_QUEUE_URL"} {
		saved := env[k]
		env[k] = ""
		if _, err := build(context.Background(), get); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("without %s: %v", k, err)
		}
		env[k] = saved
	}
	env["PROVIDER"] = "nonsense"
	if _, err := build(context.Background(), get); err == nil {
		t.Error("an unknown provider was accepted")
	}
}

// The reconciler treats generation as the deployment declares it: retry-safe
// by default, an effect when GENERATION_EFFECT_CLASS says so, and refuses
// to start on a class it does not know.
func TestBuildReadsTheGenerationEffectClass(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"TASKS_TABLE": "tasks", "REVIEW_TABLE": "reviews", "WATCH_TABLE": "watch", "AWS_REGION": "us-east-1",
		"TASK_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "DEAD_LETTER_QUEUE_URL": "http://127.0.0.1:1/000000000000/dlq",
	}
	get := func(k string) string { return env[k] }
	for class, want := range map[string]bool{"": true, "retry-safe": true, "effect": false} {
		env["GENERATION_EFFECT_CLASS"] = class
		h, err := build(context.Background(), get)
		if err != nil {
			t.Fatalf("%q: %v", class, err)
		}
		if h.RetrySafeGeneration != want {
			t.Errorf("GENERATION_EFFECT_CLASS=%q: RetrySafeGeneration = %t, want %t", class, h.RetrySafeGeneration, want)
		}
	}
	env["GENERATION_EFFECT_CLASS"] = "maybe"
	if _, err := build(context.Background(), get); err == nil || !strings.Contains(err.Error(), "GENERATION_EFFECT_CLASS") {
		t.Errorf("an unknown effect class: %v", err)
	}
}
