package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The artifact a delivery carries must be the approved artifact, byte for
// byte (DESIGN §10: the receipt's payload_sha256 is "the approved
// artifact").

func gatedTaskAwaitingApproval(result string, ref *ledger.PayloadRef) *ledger.Task {
	t := &ledger.Task{TaskID: "t_gated", Scope: "anonymous", Kind: "generate", State: ledger.StateAwaitingApproval}
	t.Plan = `{"approval":{"required":true},"deliver":[{"destination":"notify","params":{"to":"a@example.com"}}]}`
	t.ApprovalRequired = true
	t.ApprovalState = ledger.ApprovalPending
	t.Result, t.ResultRef = result, ref
	if ref != nil {
		t.ResultSHA256 = ref.SHA256
	} else {
		t.ResultSHA256 = ledger.SHA256Hex(result)
	}
	return t
}

func deliveredPayload(t *testing.T, n ledger.NewTask) json.RawMessage {
	t.Helper()
	in, err := destination.ParseDeliverInput(json.RawMessage(n.Input))
	if err != nil {
		t.Fatalf("delivery input does not parse: %v", err)
	}
	return in.Payload
}

// TestOperatorApproveOfAnOffloadedResultSaysWhy: the operator CLI
// cannot read the payload bucket; approving an S3-offloaded result from it
// is refused with a clear error naming the API route, never a delivery of
// an empty payload.
func TestOperatorApproveOfAnOffloadedResultSaysWhy(t *testing.T) {
	artifact := `{"text":"` + strings.Repeat("x", 8<<10) + `"}`
	ref := &ledger.PayloadRef{Bucket: "payloads", Key: "results/t_gated/1", SHA256: ledger.SHA256Hex(artifact), Size: int64(len(artifact))}
	task := gatedTaskAwaitingApproval("", ref)
	req, err := ApproveAsOperator(task, ref.SHA256, "", "operator:alice", "", time.Now())
	if err == nil || len(req.Deliveries) != 0 || !strings.Contains(err.Error(), "/approve") {
		t.Fatalf("operator approve of an offloaded result = %d deliveries, %v; want a clear refusal naming the API", len(req.Deliveries), err)
	}
}

// TestDeliveredPayloadIsTheApprovedBytes: the approver echoes
// result_sha256, the hash of the exact stored bytes. A provider's JSON may
// not be in canonical form (keys not sorted, whitespace — what
// encoding/json produces for a struct, and what model output looks like);
// a delivery whose payload were the canonical re-encoding would carry a
// payload_sha256 (the receipt's "approved artifact") other than the hash
// the approver approved, and the receipt could not be matched to the
// approval. So the delivery carries the stored bytes as they are.
func TestDeliveredPayloadIsTheApprovedBytes(t *testing.T) {
	result := `{"text": "hello", "model": "simulated-1"}`
	task := gatedTaskAwaitingApproval(result, nil)
	req, err := ApproveAsOperator(task, task.ResultSHA256, "", "operator:alice", "", time.Now())
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if got := destination.HashPayload(deliveredPayload(t, req.Deliveries[0])); got != task.ResultSHA256 {
		t.Fatalf("delivered payload sha256 %s is not the approved artifact_sha256 %s (payload %s)", got, task.ResultSHA256, deliveredPayload(t, req.Deliveries[0]))
	}
}
