package local_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/local"
)

// TestStackAdmission: with PROVIDER_ADMISSION (Options.Admission) the
// local stack behaves as deployed — a task whose call bound exceeds the
// simulated model's tokens_per_minute is refused at submit with 422
// exceeds-admission-limit and nothing recorded, and one under it is
// admitted by the worker and completes.
func TestStackAdmission(t *testing.T) {
	t.Parallel()
	b := setupStack(t, local.Options{StatusEvery: -1,
		Admission: `{"models":{"simulated-1":{"requests_per_minute":100,"tokens_per_minute":1000}}}`})
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
	// No max_tokens: bounded by 8,192 output tokens, over the 1,000 limit.
	status, v := post("adm-over", `{"kind":"generate","input":{"prompt":"Say hello"}}`)
	if status != http.StatusUnprocessableEntity || v["type"] != "https://taskledger.dev/problems/exceeds-admission-limit" ||
		!strings.Contains(v["detail"].(string), "1000 tokens_per_minute") || !strings.Contains(v["detail"].(string), "(provider simulated)") {
		t.Fatalf("over the limit: %d %v; want 422 exceeds-admission-limit", status, v)
	}
	resp, err := b.client.Get(b.st.URL + "/tasks/" + b.st.Ledger.TaskID("anonymous", "adm-over"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the refused task is readable (%d): it was recorded", resp.StatusCode)
	}
	status, v = post("adm-under", `{"kind":"generate","input":{"prompt":"Say hello","max_tokens":40}}`)
	if status != http.StatusAccepted {
		t.Fatalf("under the limit: %d %v", status, v)
	}
	b.awaitState(t, v["task_id"].(string), "completed", 20*time.Second)
	// The worker admitted it: the model's window item counts the call.
	out, err := b.st.DDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(b.st.Names.TasksTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	windows := 0
	for _, it := range out.Items {
		if k, ok := it["task_id"].(*types.AttributeValueMemberS); ok && admission.IsWindowKey(k.Value) && strings.Contains(k.Value, "simulated-1") {
			windows++
		}
	}
	if windows == 0 {
		t.Fatal("no admission window item: the local worker did not admit the call")
	}
}
