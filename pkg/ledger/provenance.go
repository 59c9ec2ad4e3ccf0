package ledger

// Provenance types: how a deliver task came to be (DESIGN §15).
const (
	// ProvenanceApproval: an approval of a gated task created it.
	ProvenanceApproval = "approval"
	// ProvenanceDirect: a caller submitted it as {"kind":"deliver"}.
	ProvenanceDirect = "direct"
	// ProvenancePlan: the completion of a task whose plan delivers
	// without approval created it, with the result (TaskID, ArtifactSHA256).
	ProvenancePlan = "plan"
	// ProvenanceNotification: a transition of TaskID created it to tell a
	// person about Event (completed, failed, parked, awaiting_approval).
	ProvenanceNotification = "notification"
)

// Provenance is where a deliver task came from, recorded when it is
// created and carried to its destination inside what is signed: an
// approval, or a direct submit by Caller (a caller scope). It is never
// read from a request body: Approve writes the approval's, the HTTP API the
// submitting caller's.
type Provenance struct {
	Type string `dynamodbav:"type"`
	// TaskID, ArtifactSHA256 (the approved artifact: an edit's hash when
	// the approver edited it, so the delivered payload's hash), DecidedBy
	// and Round: an approval's.
	TaskID         string `dynamodbav:"task_id,omitempty"`
	ArtifactSHA256 string `dynamodbav:"artifact_sha256,omitempty"`
	DecidedBy      string `dynamodbav:"decided_by,omitempty"`
	Round          int    `dynamodbav:"round"`
	Caller         string `dynamodbav:"caller,omitempty"` // the caller scope of a direct submit
	Event          string `dynamodbav:"event,omitempty"`  // what a notification tells
}
