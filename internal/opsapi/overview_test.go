package opsapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/taskledger/taskledger/internal/overview"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestOverviewRoute(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		code, _, m := do(t, b, "GET", "/overview", "")
		if code != http.StatusNotFound || m["type"] != "https://taskledger.dev/problems/not-found" {
			t.Errorf("without an overview: %d %v, want 404 not-found", code, m)
		}

		b.h.Overview = &overview.Reader{Ledger: b.l}
		parked(t, b, "ov-1")
		code, hd, m := do(t, b, "GET", "/overview", "")
		if code != http.StatusOK || hd.Get("Cache-Control") != "no-store" {
			t.Fatalf("GET /overview: %d (Cache-Control %q) %v", code, hd.Get("Cache-Control"), m)
		}
		rv, _ := m["reviews"].(map[string]any)
		reasons, _ := rv["by_reason"].(map[string]any)
		if rv["open"] != 1.0 || reasons["budget_exhausted"] != 1.0 {
			t.Errorf("reviews = %v, want 1 open budget_exhausted", rv)
		}
		if states, _ := m["states"].([]any); len(states) != len(ledger.Partitions) {
			t.Errorf("states = %v, want the %d by_state partitions", m["states"], len(ledger.Partitions))
		}

		// A DNS-rebinding page's Host is refused before anything is read.
		req := httptest.NewRequest("GET", "/overview", nil)
		req.Host = "evil.example:3000"
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusMisdirectedRequest {
			t.Errorf("foreign Host: %d, want 421", rec.Code)
		}
	})
}
