package local_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/local"
)

// The local stack with the simulated destinations (what make run
// registers): a deliver task submitted over HTTP is delivered once through
// the poller and the worker, and its receipt is on GET /tasks/{id}.
func TestStackDeliversWithTheSimulatedDestinations(t *testing.T) {
	t.Parallel()
	cfg, err := deliver.ParseConfig(`{"simulated":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	b := setupStack(t, local.Options{Destinations: cfg})
	if got := strings.Join(b.st.Destinations.Names(), ","); got != "crm,notify,publish" {
		t.Fatalf("destinations %q", got)
	}
	req, _ := http.NewRequest(http.MethodPost, b.st.URL+"/tasks", strings.NewReader(
		`{"kind":"deliver","input":{"destination":"notify","params":{"to":"requester@example.com"},"payload":{"order":"order-4711"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "order-4711")
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
	b.awaitState(t, id, "completed", 20*time.Second)
	if n := b.st.Destinations.Sims[dsim.Notify].SideEffects(id); n != 1 {
		t.Fatalf("notify side effects = %d, want 1", n)
	}
	r, err := b.client.Get(b.st.URL + "/tasks/" + id)
	if err != nil {
		t.Fatal(err)
	}
	view, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{`"destination":"notify"`, `"destination_identity":"simulated:notify"`, `"approved_by":""`} {
		if !strings.Contains(string(view), want) {
			t.Errorf("task view lacks %s: %s", want, view)
		}
	}
}
