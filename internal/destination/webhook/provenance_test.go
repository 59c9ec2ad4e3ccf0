package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/destination"
)

// A delivery's provenance is inside the signed body: the receiver (which
// verifies every request with the independent Standard Webhooks library)
// reads it from data.provenance, and a body whose provenance was changed
// — a direct delivery dressed as an approved one — no longer verifies.
func TestProvenanceIsInsideTheSignedBody(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// The direct one last: its headers are the receiver's lastHeaders.
	for _, c := range []struct {
		op   string
		prov destination.Provenance
	}{
		{"task-approved", destination.Provenance{Type: destination.ProvenanceApproval, TaskID: "t_gated", ArtifactSHA256: destination.HashPayload(json.RawMessage(payload)), DecidedBy: "jwt:carol", Round: 0}},
		{"task-direct", destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:bob"}},
	} {
		op, prov := c.op, c.prov
		r := req(op, "crm")
		r.Provenance = &prov
		if _, err := b.hook.Deliver(context.Background(), r); err != nil {
			t.Fatalf("%s: Deliver: %v", op, err)
		}
		b.rcv.mu.Lock()
		body, bad := b.rcv.bodies[op], b.rcv.badSigs
		b.rcv.mu.Unlock()
		if bad != 0 {
			t.Fatalf("%s: %d bad signatures", op, bad)
		}
		var got struct {
			Data struct {
				PayloadSHA256 string                 `json:"payload_sha256"`
				Provenance    destination.Provenance `json:"provenance"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &got); err != nil || got.Data.Provenance != prov {
			t.Fatalf("%s: body provenance %+v (%v), want %+v; body %s", op, got.Data.Provenance, err, prov, body)
		}
		if prov.Type == destination.ProvenanceApproval && got.Data.PayloadSHA256 != prov.ArtifactSHA256 {
			t.Fatalf("approved delivery: payload_sha256 %s is not the approved artifact %s", got.Data.PayloadSHA256, prov.ArtifactSHA256)
		}
		if prov.Type == destination.ProvenanceDirect && strings.Contains(string(body), `"round"`) {
			t.Fatalf("a direct delivery's provenance carries approval fields: %s", body)
		}
	}
	// The direct body re-sent with its provenance rewritten, under the
	// original signature headers: the receiver's verification refuses it.
	b.rcv.mu.Lock()
	body, headers := b.rcv.bodies["task-direct"], b.rcv.lastHeaders.Clone()
	b.rcv.mu.Unlock()
	forged := bytes.Replace(body, []byte(`{"type":"direct","caller":"jwt:bob"}`),
		[]byte(`{"type":"approval","task_id":"t_gated","artifact_sha256":"`+destination.HashPayload(json.RawMessage(payload))+`","decided_by":"jwt:carol","round":0}`), 1)
	if bytes.Equal(forged, body) {
		t.Fatalf("direct body has no provenance to forge: %s", body)
	}
	if err := b.rcv.wh.Verify(body, headers); err != nil {
		t.Fatalf("the direct body does not verify under its own headers: %v", err)
	}
	if err := b.rcv.wh.Verify(forged, headers); err == nil {
		t.Fatal("a body with rewritten provenance verified under the original signature")
	}
}
