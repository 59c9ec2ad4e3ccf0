package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// `taskledger task get` shows a deliver task's receipt: destination and
// its identity, the delivered payload's hash, public URL, readback, and
// that a direct deliver had no approval.
func TestTaskGetShowsTheDeliveryReceipt(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		task, err := b.l.Create(ctx, ledger.NewTask{Scope: "alice", IdempotencyKey: "order-4711", Kind: destination.KindDeliver,
			Input: `{"destination":"publish","params":{"slug":"r-2-1"},"payload":{"title":"Release 2.1"}}`, PayloadSHA256: "sha-order-4711"})
		if err == nil {
			task, err = b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		}
		sum := destination.HashPayload([]byte(`{"title":"Release 2.1"}`))
		rc, _ := json.Marshal(destination.Receipt{OperationID: task.TaskID, PayloadSHA256: sum, Destination: "publish",
			DestinationIdentity: "publish.simulated.invalid", ProviderRef: "pub-1", PublicURL: "https://publish.simulated.invalid/r-2-1",
			ReadbackAt: time.Now(), ReadbackResult: destination.ReadbackContentMatch})
		if err == nil {
			_, err = b.l.Complete(ctx, task.TaskID, task.AssignmentVersion, ledger.Completion{Result: string(rc), Provider: "publish", ProviderRef: "pub-1"})
		}
		if err != nil {
			t.Fatal(err)
		}
		r := b.must(t, nil, "task", "get", task.TaskID)
		for _, want := range []string{"publish publish.simulated.invalid", sum, "https://publish.simulated.invalid/r-2-1", "content_hash_match", "direct deliver: no approval", "pub-1"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("task get lacks %q:\n%s", want, r.stdout)
			}
		}
		r = b.must(t, nil, "--json", "task", "get", task.TaskID)
		var v struct {
			Receipt struct {
				Delivery map[string]string `json:"delivery"`
			} `json:"receipt"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Receipt.Delivery["public_url"] == "" || v.Receipt.Delivery["readback_result"] != destination.ReadbackContentMatch {
			t.Fatalf("task get --json = %s (%v)", r.stdout, err)
		}
		if _, ok := v.Receipt.Delivery["approved_by"]; !ok {
			t.Fatalf("task get --json lacks approved_by: %s", r.stdout)
		}
	})
}
