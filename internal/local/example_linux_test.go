//go:build linux

package local_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/local"
)

// What make run wires: the example function under aws-lambda-rie,
// registered as the lambda destination's "example"; a deliver task
// submitted over HTTP completes with its receipt, and the function's own
// lookup finds the operation.
func TestStackDeliversToTheExampleFunctionUnderRIE(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ex, err := local.StartExampleDestination(ctx, nil)
	if err != nil {
		if os.Getenv("TASKLEDGER_REQUIRE_RIE") == "1" {
			t.Fatalf("aws-lambda-rie is required (TASKLEDGER_REQUIRE_RIE=1): %v", err)
		}
		t.Skipf("example destination unavailable: %v", err)
	}
	t.Cleanup(ex.Stop)
	var cfg deliver.Config
	ex.Register(&cfg)
	b := setupStack(t, local.Options{Destinations: cfg, LambdaEndpoint: ex.URL})
	if got := strings.Join(b.st.Destinations.Names(), ","); got != "lambda" {
		t.Fatalf("destinations %q", got)
	}
	req, _ := http.NewRequest(http.MethodPost, b.st.URL+"/tasks", strings.NewReader(
		`{"kind":"deliver","input":{"destination":"lambda","params":{"function":"example"},"payload":{"text":"hello"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "example-1")
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST deliver = %d %s", resp.StatusCode, body)
	}
	id := strings.SplitN(strings.TrimPrefix(string(body), `{"task_id":"`), `"`, 2)[0]
	v := b.awaitState(t, id, "completed", 30*time.Second)
	if !strings.Contains(string(v.Result), `"provider_ref":"ex_`) {
		t.Fatalf("result %s, want the example's receipt", v.Result)
	}
	lr, err := http.Post(ex.InvokeURL, "application/json", strings.NewReader(`{"action":"lookup","operation_id":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	lb, _ := io.ReadAll(lr.Body)
	lr.Body.Close()
	if !strings.Contains(string(lb), `"found":true`) {
		t.Fatalf("lookup of %s = %s, want found", id, lb)
	}
}
