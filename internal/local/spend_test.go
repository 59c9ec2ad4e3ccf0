package local_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/local"
)

// TestStackBudgetedTask: `make run`'s stack prices the simulated model with
// the template's SpendConfig default, so a budgeted task submitted over
// HTTP completes and its view shows what it used and cost; a cost budget
// too small for the call's reservation (41 input + 40 output tokens at $3
// and $15 per million: $0.000723) parks it budget_exhausted.
func TestStackBudgetedTask(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{})
	post := func(key, body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, b.st.URL+"/tasks", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatalf("POST /tasks: %v", err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("body %s: %v", raw, err)
		}
		return resp.StatusCode, v
	}
	getView := func(id string) map[string]any {
		resp, err := b.client.Get(b.st.URL + "/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	status, v := post("local-budget-1", `{"kind":"generate","input":{"prompt":"Say hello","max_tokens":40},"budget":{"max_total_tokens":1000,"max_cost_usd":0.01}}`)
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %v", status, v)
	}
	id := v["task_id"].(string)
	b.awaitState(t, id, "completed", 20*time.Second)
	view := getView(id)
	usage, _ := view["usage"].(map[string]any)
	chain, _ := view["chain_usage"].(map[string]any)
	if usage == nil || usage["output_tokens"].(float64) <= 0 || usage["cost_usd"].(float64) <= 0 || chain == nil || chain["cost_usd"] != usage["cost_usd"] {
		t.Fatalf("view usage %v chain %v; want tokens and a cost, the same for the chain", usage, chain)
	}

	status, v = post("local-budget-2", `{"kind":"generate","input":{"prompt":"Say hello","max_tokens":40},"budget":{"max_cost_usd":0.0001}}`)
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %v", status, v)
	}
	b.awaitState(t, v["task_id"].(string), "needs_review", 20*time.Second)
	review, _ := getView(v["task_id"].(string))["review"].(map[string]any)
	if review == nil || review["reason"] != "budget_exhausted" || !strings.Contains(review["summary"].(string), "no call was made") {
		t.Fatalf("review %v", review)
	}
}
