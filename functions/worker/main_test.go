package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/provider/simulated"
)

func TestBuild(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("TASKS_TABLE", "tasks")
	t.Setenv("REVIEW_TABLE", "review")
	t.Setenv("WATCH_TABLE", "watch")
	t.Setenv("TASK_QUEUE_URL", "http://127.0.0.1:1/000000000000/q")
	t.Setenv("PROVIDER", "")
	t.Setenv("LEASE_SECONDS", "45")
	t.Setenv("WORKER_CONCURRENCY", "7")
	t.Setenv("PROVIDER_TIMEOUT", "90")
	h, err := build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Lease != 45*time.Second || h.QueueURL != "http://127.0.0.1:1/000000000000/q" || h.SQS == nil || h.Metrics == nil {
		t.Fatalf("handler %+v", h)
	}
	if h.Concurrency != 7 {
		t.Fatalf("concurrency %d, want WORKER_CONCURRENCY=7", h.Concurrency)
	}
	if c, ok := h.Provider.(interface{ CallTimeout() time.Duration }); !ok || c.CallTimeout() != 90*time.Second {
		t.Fatalf("provider %T does not declare PROVIDER_TIMEOUT=90 as its call timeout", h.Provider)
	}
	if h.Provider.Name() != simulated.Name {
		t.Fatalf("provider %s, want the simulated default", h.Provider.Name())
	}

	for env, want := range map[string]string{"LEASE_SECONDS": "LEASE_SECONDS", "TASKS_TABLE": "TASKS_TABLE", "PROVIDER": "PROVIDER",
		"WORKER_CONCURRENCY": "WORKER_CONCURRENCY", "PROVIDER_TIMEOUT": "PROVIDER_TIMEOUT"} {
		t.Run(env, func(t *testing.T) {
			switch env {
			case "LEASE_SECONDS":
				t.Setenv(env, "1")
			case "WORKER_CONCURRENCY":
				t.Setenv(env, "0")
			case "PROVIDER_TIMEOUT":
				t.Setenv(env, "soon")
			case "PROVIDER":
				t.Setenv(env, "nonsense")
			default:
				t.Setenv(env, "")
			}
			if _, err := build(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("build with bad %s: %v", env, err)
			}
		})
	}
}

// TestBuildAdmission: PROVIDER_ADMISSION unset builds no admission;
// set, the provider's model gets its limits; a configuration that misses
// the model, or is invalid, stops the worker at init.
func TestBuildAdmission(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("TASKS_TABLE", "tasks")
	t.Setenv("REVIEW_TABLE", "review")
	t.Setenv("WATCH_TABLE", "watch")
	t.Setenv("TASK_QUEUE_URL", "http://127.0.0.1:1/000000000000/q")
	t.Setenv("PROVIDER", "")
	t.Setenv("PROVIDER_ADMISSION", "")
	h, err := build(context.Background())
	if err != nil || h.Admission != nil {
		t.Fatalf("without PROVIDER_ADMISSION: %v, admission %+v; want none", err, h.Admission)
	}
	t.Setenv("PROVIDER_ADMISSION", `{"models":{"simulated-1":{"requests_per_minute":100,"tokens_per_minute":5000}}}`)
	h, err = build(context.Background())
	if err != nil || h.Admission == nil || h.Admission.Model != simulated.DefaultModel {
		t.Fatalf("with PROVIDER_ADMISSION: %v, admission %+v; want the simulated model admitted", err, h.Admission)
	}
	for cfg, want := range map[string]string{
		`{"models":{"other":{"requests_per_minute":1,"tokens_per_minute":1}}}`: `no limits for the provider's model "simulated-1"`,
		`{"models":{"simulated-1":{"requests_per_minute":1}}}`:                 "must be positive",
	} {
		t.Setenv("PROVIDER_ADMISSION", cfg)
		if _, err := build(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PROVIDER_ADMISSION=%s: %v, want an error containing %q", cfg, err, want)
		}
	}
}

// The worker treats generation as the deployment declares it: retry-safe
// by default, an effect when GENERATION_EFFECT_CLASS says so; an unknown
// class stops it at init.
func TestBuildReadsTheGenerationEffectClass(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("TASKS_TABLE", "tasks")
	t.Setenv("REVIEW_TABLE", "review")
	t.Setenv("WATCH_TABLE", "watch")
	t.Setenv("TASK_QUEUE_URL", "http://127.0.0.1:1/000000000000/q")
	for class, want := range map[string]bool{"": true, "retry-safe": true, "effect": false} {
		t.Setenv("GENERATION_EFFECT_CLASS", class)
		h, err := build(context.Background())
		if err != nil {
			t.Fatalf("%q: %v", class, err)
		}
		if h.RetrySafeGeneration != want {
			t.Errorf("GENERATION_EFFECT_CLASS=%q: RetrySafeGeneration = %t, want %t", class, h.RetrySafeGeneration, want)
		}
	}
	t.Setenv("GENERATION_EFFECT_CLASS", "sometimes")
	if _, err := build(context.Background()); err == nil || !strings.Contains(err.Error(), "GENERATION_EFFECT_CLASS") {
		t.Fatalf("an unknown effect class: %v", err)
	}
}
