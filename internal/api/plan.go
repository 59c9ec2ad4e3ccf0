package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Limits of a submitted plan (DESIGN §10).
const (
	// MinApprovalSeconds and MaxApprovalSeconds bound
	// approval.expires_in_seconds; DefaultApprovalSeconds applies when it
	// is absent. MaxApprovalSeconds is ledger.MaxApprovalTTL, which the
	// spend package's budget retention is derived from.
	MinApprovalSeconds     = 60
	MaxApprovalSeconds     = int64(ledger.MaxApprovalTTL / time.Second)
	DefaultApprovalSeconds = int64(ledger.DefaultApprovalTTL / time.Second)
)

// plan is the validated approval gate and deliver plan of a submission.
type plan struct {
	required   bool
	expiresIn  int64
	deliveries []planEntry
}

// planEntry is one deliver step: a destination name and its params (a
// canonical JSON object).
type planEntry struct {
	Destination string          `json:"destination"`
	Params      json.RawMessage `json:"params"`
}

// ttl is the approval deadline's distance; 0 without a gate.
func (p plan) ttl() time.Duration {
	if !p.required {
		return 0
	}
	return time.Duration(p.expiresIn) * time.Second
}

// canonical is the plan as stored on the task and hashed with the
// payload: "" when there is neither a gate nor a deliver step;
// {"approval":{"expires_in_seconds":N,"required":true},"deliver":[...]}
// with a gate; {"deliver":[...]} for deliveries without approval (created
// with the completion).
func (p plan) canonical() string {
	if !p.required && len(p.deliveries) == 0 {
		return ""
	}
	var b bytes.Buffer
	if p.required {
		fmt.Fprintf(&b, `{"approval":{"expires_in_seconds":%d,"required":true},"deliver":[`, p.expiresIn)
	} else {
		b.WriteString(`{"deliver":[`)
	}
	for i, e := range p.deliveries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"destination":`)
		b.Write(jsonString(e.Destination))
		b.WriteString(`,"params":`)
		b.Write(e.Params)
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return b.String()
}

// parsePlan validates the optional "approval" and "deliver" members of a
// submission. With approval.required = true the deliveries are created by
// the approval; without it, with the completion that saves the result, in
// the same transaction (their identity is approval:<task>:<sha>:<i> in
// both cases: ledger.DeliveryKey).
func parsePlan(fields map[string]json.RawMessage) (plan, *Problem) {
	var p plan
	if raw, ok := fields["approval"]; ok && !bytes.Equal(raw, []byte("null")) {
		obj, prob := parseObject(raw, "required", "expires_in_seconds")
		if prob != nil {
			return p, planField("approval", prob)
		}
		r, ok := obj["required"]
		if !ok || json.Unmarshal(r, &p.required) != nil {
			return p, invalidBody("approval.required", `Field "approval.required" is required and must be true or false.`)
		}
		p.expiresIn = DefaultApprovalSeconds
		if e, ok := obj["expires_in_seconds"]; ok {
			var n json.Number
			d := json.NewDecoder(bytes.NewReader(e))
			d.UseNumber()
			err := d.Decode(&n)
			i, ierr := n.Int64()
			if err != nil || ierr != nil || i < MinApprovalSeconds || i > MaxApprovalSeconds {
				return p, invalidBody("approval.expires_in_seconds",
					fmt.Sprintf(`Field "approval.expires_in_seconds" must be a whole number of seconds from %d to %d.`, MinApprovalSeconds, MaxApprovalSeconds))
			}
			p.expiresIn = i
		}
	}
	raw, ok := fields["deliver"]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return p, nil
	}
	var entries []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &entries) != nil {
		return p, invalidBody("deliver", `Field "deliver" must be an array of {"destination":...,"params":{...}}.`)
	}
	if len(entries) > ledger.MaxDeliveries {
		return p, invalidBody("deliver", fmt.Sprintf(`Field "deliver" has %d entries; at most %d are accepted.`, len(entries), ledger.MaxDeliveries))
	}
	for i, e := range entries {
		field := fmt.Sprintf("deliver[%d]", i)
		if len(e) == 0 || e[0] != '{' {
			return p, invalidBody(field, fmt.Sprintf("%s must be an object.", field))
		}
		obj, prob := parseObject(e, "destination", "params")
		if prob != nil {
			return p, planField(field, prob)
		}
		var entry planEntry
		if d, ok := obj["destination"]; !ok || json.Unmarshal(d, &entry.Destination) != nil || !destination.ValidName(entry.Destination) {
			return p, invalidBody(field+".destination", fmt.Sprintf(`%s.destination is required: 1 to %d characters, lowercase letters, digits, '_' or '-', starting with a letter.`, field, destination.MaxNameLen))
		}
		entry.Params = json.RawMessage(`{}`)
		if pr, ok := obj["params"]; ok && !bytes.Equal(pr, []byte("null")) {
			if pr[0] != '{' {
				return p, invalidBody(field+".params", field+".params must be a JSON object.")
			}
			canon, err := CanonicalJSON(pr)
			if err != nil {
				return p, malformed(field + ".params is not valid JSON.")
			}
			if len(canon) > destination.MaxParamsBytes {
				return p, invalidBody(field+".params", fmt.Sprintf("%s.params is %d bytes; at most %d are accepted.", field, len(canon), destination.MaxParamsBytes))
			}
			entry.Params = canon
		}
		p.deliveries = append(p.deliveries, entry)
	}
	return p, nil
}

// planField prefixes a problem about a nested object with its field.
func planField(field string, p *Problem) *Problem {
	if p.Field == "" {
		p.Field = field
	} else if !strings.HasPrefix(p.Field, field) {
		p.Field = field + "." + p.Field
	}
	p.Detail = field + ": " + p.Detail
	return p
}

// storedPlan reads back the plan a task was submitted with.
func storedPlan(t *ledger.Task) (plan, error) {
	var p plan
	if t.Plan == "" {
		return p, nil
	}
	var s struct {
		Approval struct {
			Required  bool  `json:"required"`
			ExpiresIn int64 `json:"expires_in_seconds"`
		} `json:"approval"`
		Deliver []planEntry `json:"deliver"`
	}
	if err := json.Unmarshal([]byte(t.Plan), &s); err != nil {
		return p, fmt.Errorf("api: task %s: stored plan: %w", t.TaskID, err)
	}
	return plan{required: s.Approval.Required, expiresIn: s.Approval.ExpiresIn, deliveries: s.Deliver}, nil
}

// payloadHashPlan is the payload hash of a submission with a plan: SHA-256
// over {"input":...,"kind":...[,"parent_task_id":...],"plan":...}, all in
// canonical form; without a plan it is payloadHash, so the hash of a plain
// submission is unchanged.
func payloadHashPlan(kind, canonicalInput, parentTaskID, canonicalPlan string) string {
	if canonicalPlan == "" {
		return payloadHash(kind, canonicalInput, parentTaskID)
	}
	var b bytes.Buffer
	b.WriteString(`{"input":`)
	b.WriteString(canonicalInput)
	b.WriteString(`,"kind":`)
	b.Write(jsonString(kind))
	if parentTaskID != "" {
		b.WriteString(`,"parent_task_id":`)
		b.Write(jsonString(parentTaskID))
	}
	b.WriteString(`,"plan":`)
	b.WriteString(canonicalPlan)
	b.WriteByte('}')
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// ReservedKeyPrefix starts the idempotency keys of the deliveries an
// approval or a completion creates, NotifyKeyPrefix those of
// notifications; a caller's Idempotency-Key may use neither (it could
// otherwise occupy the id of a follow-up before its transition creates
// it, and that transition would be refused).
const (
	ReservedKeyPrefix = "approval:"
	NotifyKeyPrefix   = followup.KeyPrefix
)

func reservedKey(key string) *Problem {
	for _, pre := range []string{ReservedKeyPrefix, NotifyKeyPrefix} {
		if strings.HasPrefix(key, pre) {
			return newProblem(TypeIdempotencyKeyInvalid, http.StatusBadRequest, "Invalid Idempotency-Key",
				`Idempotency-Keys starting with "approval:" or "notify:" are reserved for the deliveries and notifications the service creates.`).withField("Idempotency-Key")
		}
	}
	return nil
}

// submitHash is a submission's payload hash: the canonical request with its
// budget (spend.go) and its approval/deliver plan, each only when present,
// so a submission with neither hashes exactly as before either existed.
func submitHash(kind, canonicalInput string, b *budgetSpec, canonicalPlan string) string {
	switch {
	case canonicalPlan == "":
		return budgetHash(kind, canonicalInput, b)
	case !b.present():
		return payloadHashPlan(kind, canonicalInput, "", canonicalPlan)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"budget":`)
	buf.WriteString(b.canonical())
	buf.WriteString(`,"input":`)
	buf.WriteString(canonicalInput)
	buf.WriteString(`,"kind":`)
	buf.Write(jsonString(kind))
	buf.WriteString(`,"plan":`)
	buf.WriteString(canonicalPlan)
	buf.WriteByte('}')
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}
