package followup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// EnvVar names the environment variable holding Config's JSON.
const EnvVar = "TASKLEDGER_NOTIFICATIONS"

// Destination names the notifications are delivered to.
const (
	EmailDestination = "email"
	SNSDestination   = "sns"
)

// Events a notification tells.
const (
	EventCompleted        = "completed"
	EventFailed           = "failed"
	EventParked           = "parked"
	EventAwaitingApproval = "awaiting_approval"
	// EventApprovalWithdrawn: a withdrawal returned the task to its
	// approvers; numbered by the approval round it opens.
	EventApprovalWithdrawn = "approval_withdrawn"
)

// KeyPrefix starts the idempotency keys of notifications; the HTTP API
// reserves it.
const KeyPrefix = "notify:"

// Config is who is notified of what. A nil *Config notifies nobody.
type Config struct {
	// PageOrigin is the page's origin ("https://tasks.example.com"); the
	// links open <PageOrigin>/#task=<id>. Required when anyone is notified.
	PageOrigin string     `json:"page_origin"`
	Approvers  *Approvers `json:"approvers,omitempty"`
	Requester  *Requester `json:"requester,omitempty"`
}

// Approvers are told when a task needs a decision.
type Approvers struct {
	// Email are the addresses mailed (the email destination must allow
	// them).
	Email []string `json:"email,omitempty"`
	// SNSTopic names a topic of the sns destination's configuration.
	SNSTopic string `json:"sns_topic,omitempty"`
}

// Requester is how a task's requester is told it completed, failed or was
// parked.
type Requester struct {
	// Email: mail the address the submit recorded on the task (none
	// recorded: no email).
	Email bool `json:"email,omitempty"`
	// AnonymousEmail is the address recorded for a caller with no JWT
	// when the API has no authorizer (auth mode none: make run without
	// sign-in, where every caller is the one local user); "" records none.
	// It is checked against the email destination like any address.
	AnonymousEmail string `json:"anonymous_email,omitempty"`
	// SNSTopic names a topic of the sns destination's configuration.
	SNSTopic string `json:"sns_topic,omitempty"`
}

// Parse reads a Config from its JSON; "" is nil (no notifications).
// Unknown fields are errors.
func Parse(s string) (*Config, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var c Config
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return nil, fmt.Errorf("followup: %s: %w", EnvVar, err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.Approvers == nil && c.Requester == nil {
		return nil, nil
	}
	return &c, nil
}

func (c *Config) validate() error {
	u, err := url.Parse(c.PageOrigin)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("followup: %s: page_origin %q must be an origin such as https://tasks.example.com", EnvVar, c.PageOrigin)
	}
	c.PageOrigin = strings.TrimSuffix(c.PageOrigin, "/")
	if a := c.Approvers; a != nil {
		for _, e := range a.Email {
			if !strings.Contains(e, "@") {
				return fmt.Errorf("followup: %s: approvers.email %q is not an address", EnvVar, e)
			}
		}
		if len(a.Email) == 0 && a.SNSTopic == "" {
			return fmt.Errorf("followup: %s: approvers names neither email addresses nor an sns_topic", EnvVar)
		}
	}
	if r := c.Requester; r != nil && !r.Email && r.SNSTopic == "" {
		return fmt.Errorf("followup: %s: requester needs email:true or an sns_topic", EnvVar)
	}
	return nil
}

// RequesterEmail reports whether requesters are mailed (the submit then
// records the caller's address).
func (c *Config) RequesterEmail() bool { return c != nil && c.Requester != nil && c.Requester.Email }

// Link is the page's link to task id.
func (c *Config) Link(id string) string { return c.PageOrigin + "/#task=" + url.QueryEscape(id) }

// NotDeliverableError: the result does not make a valid deliver input for
// plan entry Index (not a JSON object, or too large for a delivery).
type NotDeliverableError struct {
	TaskID string
	Index  int
	Err    error
}

func (e *NotDeliverableError) Error() string {
	return fmt.Sprintf("followup: task %s: the result does not make a valid delivery for deliver[%d]: %v", e.TaskID, e.Index, e.Err)
}

func (e *NotDeliverableError) Unwrap() error { return e.Err }

// planEntry is one stored deliver step.
type planEntry struct {
	Destination string          `json:"destination"`
	Params      json.RawMessage `json:"params"`
}

// planDeliveries returns t's plan entries when the plan delivers without
// approval (nil otherwise).
func planDeliveries(t *ledger.Task) ([]planEntry, error) {
	if t.Plan == "" || t.ApprovalRequired {
		return nil, nil
	}
	var p struct {
		Deliver []planEntry `json:"deliver"`
	}
	if err := json.Unmarshal([]byte(t.Plan), &p); err != nil {
		return nil, fmt.Errorf("followup: task %s: stored plan: %w", t.TaskID, err)
	}
	return p.Deliver, nil
}

// Completion is what the completion of t (claimed or read, at its current
// assignment version) with result (its exact JSON bytes) creates, by the
// state it leaves: for completed, the deliveries of a plan without
// approval and the requester's notification; for awaiting_approval, the
// approvers'. nil when there is nothing (c nil and no plan deliveries).
// Errors: *NotDeliverableError.
func (c *Config) Completion(t *ledger.Task, result string) (map[ledger.State][]ledger.NewTask, error) {
	entries, err := planDeliveries(t)
	if err != nil {
		return nil, err
	}
	var done []ledger.NewTask
	sha := ledger.SHA256Hex(result)
	for i, e := range entries {
		params := e.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		input := `{"destination":` + jsonString(e.Destination) + `,"params":` + string(params) + `,"payload":` + result + `}`
		if _, err := destination.ParseDeliverInput(json.RawMessage(input)); err != nil {
			return nil, &NotDeliverableError{TaskID: t.TaskID, Index: i, Err: err}
		}
		done = append(done, ledger.NewTask{
			Scope: t.Scope, IdempotencyKey: ledger.DeliveryKey(t.TaskID, sha, i, 0), Kind: ledger.KindDeliver,
			Input: input, PayloadSHA256: payloadHash(input, t.TaskID), ParentTaskID: t.TaskID, CorrelationID: t.CorrelationID,
			Provenance: &ledger.Provenance{Type: ledger.ProvenancePlan, TaskID: t.TaskID, ArtifactSHA256: sha},
		})
	}
	done = append(done, c.requester(t, EventCompleted, t.AssignmentVersion)...)
	out := map[ledger.State][]ledger.NewTask{}
	if len(done) > 0 {
		out[ledger.StateCompleted] = done
	}
	if w := c.approvers(t, EventAwaitingApproval, t.AssignmentVersion); len(w) > 0 {
		out[ledger.StateAwaitingApproval] = w
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Failed is what Fail of t creates: the requester's notification (nil
// when none is configured).
func (c *Config) Failed(t *ledger.Task) map[ledger.State][]ledger.NewTask {
	if n := c.requester(t, EventFailed, t.AssignmentVersion); len(n) > 0 {
		return map[ledger.State][]ledger.NewTask{ledger.StateFailed: n}
	}
	return nil
}

// Parked is what a park of t (as read: the park is conditioned on it)
// creates: the requester's notification of park number t.ParkCount+1.
func (c *Config) Parked(t *ledger.Task) []ledger.NewTask {
	return c.requester(t, EventParked, int64(t.ParkCount)+1)
}

// Approved is what the approval that completes t creates (t as read: the
// approval is conditioned on its round): the requester's notification that
// it completed, numbered by the approval round. A round is approved at
// most once (only a withdrawal reopens the decision, in the next round), so
// a replayed or racing identical approval creates none again and a
// re-approval after a withdrawal tells the requester once more. A gated
// task's worker completion (awaiting_approval) files no completed
// notification, so these keys meet none of Completion's.
func (c *Config) Approved(t *ledger.Task) []ledger.NewTask {
	return c.requester(t, EventCompleted, int64(t.ApprovalRound))
}

// Withdrawn is what a withdrawal of t's approval creates (t as read: the
// withdrawal is conditioned on its round): the approvers' notification
// that a decision is needed again, numbered by the round it opens.
func (c *Config) Withdrawn(t *ledger.Task) []ledger.NewTask {
	return c.approvers(t, EventApprovalWithdrawn, int64(t.ApprovalRound)+1)
}

// message is a notification's payload: what happened and the link; the
// email destination mails "text".
type message struct {
	Event  string `json:"event"`
	Link   string `json:"link"`
	TaskID string `json:"task_id"`
	Text   string `json:"text"`
}

var eventText = map[string]string{
	EventCompleted:         "has completed",
	EventFailed:            "has failed",
	EventParked:            "was parked for review: a person must decide what happens next",
	EventAwaitingApproval:  "needs a decision: its result awaits approval",
	EventApprovalWithdrawn: "needs a decision again: its approval was withdrawn",
}

func (c *Config) requester(t *ledger.Task, event string, n int64) []ledger.NewTask {
	if c == nil || c.Requester == nil || t.Kind == ledger.KindDeliver && isNotification(t) {
		return nil
	}
	var out []ledger.NewTask
	if c.Requester.Email && t.RequesterEmail != "" {
		out = append(out, c.notification(t, event, n, EmailDestination, emailParams([]string{t.RequesterEmail}, t.TaskID, event)))
	}
	if c.Requester.SNSTopic != "" {
		out = append(out, c.notification(t, event, n, SNSDestination, snsParams(c.Requester.SNSTopic, t.TaskID, event)))
	}
	return out
}

func (c *Config) approvers(t *ledger.Task, event string, n int64) []ledger.NewTask {
	if c == nil || c.Approvers == nil || !t.ApprovalRequired {
		return nil
	}
	var out []ledger.NewTask
	if len(c.Approvers.Email) > 0 {
		out = append(out, c.notification(t, event, n, EmailDestination, emailParams(c.Approvers.Email, t.TaskID, event)))
	}
	if c.Approvers.SNSTopic != "" {
		out = append(out, c.notification(t, event, n, SNSDestination, snsParams(c.Approvers.SNSTopic, t.TaskID, event)))
	}
	return out
}

// isNotification: t is itself a notification (its own outcome is never
// notified: a failed notification does not send another).
func isNotification(t *ledger.Task) bool {
	return t.Provenance != nil && t.Provenance.Type == ledger.ProvenanceNotification || strings.HasPrefix(t.IdempotencyKey, KeyPrefix)
}

func subject(id, event string) string {
	return "taskledger: task " + id + " " + strings.SplitN(eventText[event], ":", 2)[0]
}

func emailParams(to []string, id, event string) string {
	b, _ := json.Marshal(struct {
		Subject string   `json:"subject"`
		To      []string `json:"to"`
	}{subject(id, event), to})
	return string(b)
}

func snsParams(topic, id, event string) string {
	b, _ := json.Marshal(struct {
		Subject string `json:"subject"`
		Topic   string `json:"topic"`
	}{subject(id, event), topic})
	return string(b)
}

// notification is the deliver task telling event number n of t through
// dest (params: its canonical JSON).
func (c *Config) notification(t *ledger.Task, event string, n int64, dest, params string) ledger.NewTask {
	link := c.Link(t.TaskID)
	payload, _ := json.Marshal(message{Event: event, Link: link, TaskID: t.TaskID,
		Text: "Task " + t.TaskID + " " + eventText[event] + ".\n\nOpen it: " + link + "\n"})
	input := `{"destination":` + jsonString(dest) + `,"params":` + params + `,"payload":` + string(payload) + `}`
	return ledger.NewTask{
		Scope: t.Scope, IdempotencyKey: Key(t.TaskID, event, n, dest), Kind: ledger.KindDeliver,
		Input: input, PayloadSHA256: payloadHash(input, t.TaskID), ParentTaskID: t.TaskID, CorrelationID: t.CorrelationID,
		Provenance: &ledger.Provenance{Type: ledger.ProvenanceNotification, TaskID: t.TaskID, Event: event},
	}
}

// Key is the idempotency key of the notification of event number n of
// task id through dest.
func Key(id, event string, n int64, dest string) string {
	return KeyPrefix + id + ":" + event + ":" + strconv.FormatInt(n, 10) + ":" + dest
}

// payloadHash is the deliver task's payload hash, as the HTTP API computes
// it for a deliver task with a parent: SHA-256 of
// {"input":<input>,"kind":"deliver","parent_task_id":<parent>}.
func payloadHash(input, parent string) string {
	sum := sha256.Sum256([]byte(`{"input":` + input + `,"kind":"deliver","parent_task_id":` + jsonString(parent) + `}`))
	return hex.EncodeToString(sum[:])
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// Checker checks deliver inputs against the configured destinations
// (*deliver.Registry).
type Checker interface {
	Check(in destination.DeliverInput) error
}

// Check refuses, at start, a configuration its destinations cannot serve:
// a channel whose destination is not configured, an approver address the
// email destination does not allow, an SNS topic it does not name. reg nil
// (no destinations) refuses any channel.
func (c *Config) Check(reg Checker) error {
	if c == nil {
		return nil
	}
	if reg == nil {
		return fmt.Errorf("followup: %s notifies people but no destinations are configured (TASKLEDGER_DESTINATIONS: email and/or sns)", EnvVar)
	}
	check := func(what, dest, params string, unknownOnly bool) error {
		err := reg.Check(destination.DeliverInput{Destination: dest, Params: json.RawMessage(params)})
		var ud *destination.UnknownDestinationError
		if err == nil || unknownOnly && !errors.As(err, &ud) {
			return nil
		}
		return fmt.Errorf("followup: %s: %s: %w", EnvVar, what, err)
	}
	if a := c.Approvers; a != nil {
		if len(a.Email) > 0 {
			if err := check("approvers.email", EmailDestination, emailParams(a.Email, "t", EventAwaitingApproval), false); err != nil {
				return err
			}
		}
		if a.SNSTopic != "" {
			if err := check("approvers.sns_topic", SNSDestination, snsParams(a.SNSTopic, "t", EventAwaitingApproval), false); err != nil {
				return err
			}
		}
	}
	if r := c.Requester; r != nil {
		if r.Email {
			// The address is the requester's; only the destination must exist.
			if err := check("requester.email", EmailDestination, emailParams([]string{"requester@example.invalid"}, "t", EventCompleted), true); err != nil {
				return err
			}
		}
		if r.SNSTopic != "" {
			if err := check("requester.sns_topic", SNSDestination, snsParams(r.SNSTopic, "t", EventCompleted), false); err != nil {
				return err
			}
		}
	}
	return nil
}
