package review_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestDeliveryReviewNamesThePayloadTheDestinationSaw: an unknown_outcome
// review of a delivery tells the operator to check the destination for the
// delivery; what the destination received and reports (the receipt's
// payload_sha256, the webhook body) is the payload, hashed by
// destination.HashPayload. So that is the hash the review names — not
// t.PayloadSHA256, the submission's dedup hash over
// {"input","kind","parent_task_id"}, which matches neither the payload nor
// the approved artifact and which the operator could match to nothing the
// destination shows.
func TestDeliveryReviewNamesThePayloadTheDestinationSaw(t *testing.T) {
	payload := `{"text":"the summary"}`
	input := `{"destination":"notify","params":{"to":"a@example.com"},"payload":` + payload + `}`
	in, err := destination.ParseDeliverInput(json.RawMessage(input))
	if err != nil {
		t.Fatal(err)
	}
	want := destination.HashPayload(in.Payload)
	task := &ledger.Task{TaskID: "t_deliver", Kind: "deliver", Input: input, ParentTaskID: "t_parent",
		PayloadSHA256: ledger.SHA256Hex(`{"input":` + input + `,"kind":"deliver","parent_task_id":"t_parent"}`), State: ledger.StateUnknown}
	r := review.DeliveryUnknownOutcome(task, "notify", "readback none", time.Unix(1_700_000_000, 0), "no readback")
	all := strings.Join(r.Known, "\n")
	if !strings.Contains(all, want) {
		t.Fatalf("the review never names the delivered payload's sha256 %s (what the destination received); it says:\n%s", want, all)
	}
}
