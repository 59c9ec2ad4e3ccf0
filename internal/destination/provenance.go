package destination

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Provenance types (Provenance.Type).
const (
	// ProvenanceApproval: a person approved the artifact of a gated task.
	ProvenanceApproval = "approval"
	// ProvenanceDirect: a caller submitted the delivery directly, with no
	// approval.
	ProvenanceDirect = "direct"
	// ProvenancePlan: the completion of a task whose plan delivers without
	// approval created it, with the result (no person decided).
	ProvenancePlan = "plan"
	// ProvenanceNotification: a transition of a task created it to tell a
	// person about an event of the task.
	ProvenanceNotification = "notification"
)

// Provenance tells a receiver where a delivery came from (DESIGN §15). It
// travels inside what the destination authenticates — the signed webhook
// body, the EventBridge event's detail — so a receiver that accepts only
// approved deliveries checks Type == "approval" (and, if it likes, that
// ArtifactSHA256 is the payload_sha256 it received). On the wire:
//
//	{"type":"approval","task_id":"t_…","artifact_sha256":"<hex>","decided_by":"jwt:…","round":0}
//	{"type":"direct","caller":"jwt:…"}
//	{"type":"plan","task_id":"t_…","artifact_sha256":"<hex>"}
//	{"type":"notification","task_id":"t_…","event":"completed"}
type Provenance struct {
	Type string `json:"type"`
	// TaskID is the gated task whose approval created the delivery.
	TaskID string `json:"task_id,omitempty"`
	// ArtifactSHA256 is the approved artifact's hash: the delivered
	// payload's.
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	// DecidedBy is the approver's caller scope.
	DecidedBy string `json:"decided_by,omitempty"`
	// Round is the approval round (0 before any withdrawal).
	Round int `json:"round"`
	// Caller is a direct delivery's submitting caller scope.
	Caller string `json:"caller,omitempty"`
	// Event is what a notification tells (completed, failed, parked,
	// awaiting_approval).
	Event string `json:"event,omitempty"`
}

// MarshalJSON writes exactly the fields of p's type (an approval's round
// even when 0; nothing of an approval on a direct delivery).
func (p Provenance) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case ProvenanceApproval:
		return json.Marshal(struct {
			Type           string `json:"type"`
			TaskID         string `json:"task_id"`
			ArtifactSHA256 string `json:"artifact_sha256"`
			DecidedBy      string `json:"decided_by"`
			Round          int    `json:"round"`
		}{p.Type, p.TaskID, p.ArtifactSHA256, p.DecidedBy, p.Round})
	case ProvenanceDirect:
		return json.Marshal(struct {
			Type   string `json:"type"`
			Caller string `json:"caller"`
		}{p.Type, p.Caller})
	case ProvenancePlan:
		return json.Marshal(struct {
			Type           string `json:"type"`
			TaskID         string `json:"task_id"`
			ArtifactSHA256 string `json:"artifact_sha256"`
		}{p.Type, p.TaskID, p.ArtifactSHA256})
	case ProvenanceNotification:
		return json.Marshal(struct {
			Type   string `json:"type"`
			TaskID string `json:"task_id"`
			Event  string `json:"event"`
		}{p.Type, p.TaskID, p.Event})
	}
	return nil, unknownProvenance(p.Type)
}

// Validate checks that p says where a delivery came from: an approval
// names its task, a 64-hex artifact hash, its decider and a round >= 0; a
// direct delivery its caller.
func (p Provenance) Validate() error {
	switch p.Type {
	case ProvenanceApproval:
		if p.TaskID == "" || p.DecidedBy == "" || p.Round < 0 || !hex64(p.ArtifactSHA256) {
			return errors.New("destination: approval provenance needs task_id, a 64-hex artifact_sha256, decided_by and a round >= 0")
		}
		return nil
	case ProvenanceDirect:
		if p.Caller == "" {
			return errors.New("destination: direct provenance needs the caller")
		}
		return nil
	case ProvenancePlan:
		if p.TaskID == "" || !hex64(p.ArtifactSHA256) {
			return errors.New("destination: plan provenance needs task_id and a 64-hex artifact_sha256")
		}
		return nil
	case ProvenanceNotification:
		if p.TaskID == "" || p.Event == "" {
			return errors.New("destination: notification provenance needs task_id and the event")
		}
		return nil
	}
	return unknownProvenance(p.Type)
}

func unknownProvenance(typ string) error {
	return fmt.Errorf("destination: provenance type %q is not one of %q, %q, %q, %q", Clip(typ, 20), ProvenanceApproval, ProvenanceDirect, ProvenancePlan, ProvenanceNotification)
}

func hex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
