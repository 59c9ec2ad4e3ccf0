package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// TaskView is the part of GET /tasks/{id} the scenarios read.
type TaskView struct {
	TaskID       string          `json:"task_id"`
	State        string          `json:"state"`
	Kind         string          `json:"kind"`
	Attempts     int             `json:"attempts"`
	ParentTaskID string          `json:"parent_task_id"`
	Result       json.RawMessage `json:"result"`
	ResultSHA256 string          `json:"result_sha256"`
	Error        *struct {
		Class   string `json:"class"`
		Message string `json:"message"`
	} `json:"error"`
	Receipt    Receipt    `json:"receipt"`
	Approval   *Approval  `json:"approval"`
	Deliveries []Delivery `json:"deliveries"`
	Review     *struct {
		Reason  string `json:"reason"`
		Summary string `json:"summary"`
	} `json:"review"`
}

// Receipt is a task's receipt (DESIGN §10's fields for a deliver task).
type Receipt struct {
	OperationID         string `json:"operation_id"`
	PayloadSHA256       string `json:"payload_sha256"`
	Destination         string `json:"destination"`
	DestinationIdentity string `json:"destination_identity"`
	ProviderRef         string `json:"provider_ref"`
	PublicURL           string `json:"public_url"`
	ReadbackAt          string `json:"readback_at"`
	ReadbackResult      string `json:"readback_result"`
	ApprovedBy          string `json:"approved_by"`
	ApprovedAt          string `json:"approved_at"`
	Policy              string `json:"policy"`
	CompletedAt         string `json:"completed_at"`
}

// Approval is a gated task's approval.
type Approval struct {
	State          string `json:"state"`
	ArtifactSHA256 string `json:"artifact_sha256"`
	DecidedBy      string `json:"decided_by"`
	DecidedAt      string `json:"decided_at"`
	Note           string `json:"note"`
	Policy         string `json:"policy"`
}

// Delivery is one deliver task of an approval, as the generate task lists it.
type Delivery struct {
	TaskID      string `json:"task_id"`
	Destination string `json:"destination"`
	State       string `json:"state"`
}

// client speaks the HTTP API.
type client struct {
	base string
	http *http.Client
	poll time.Duration
}

// call sends method path with body (nil: none) and decodes a JSON reply
// into out (nil: ignored). It returns the status and the raw body.
func (c *client) call(ctx context.Context, method, path, key string, body any, out any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: read reply: %w", method, path, err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, raw, fmt.Errorf("%s %s: decode reply: %w", method, path, err)
		}
	}
	return resp.StatusCode, raw, nil
}

// expect calls and fails unless the status is want.
func (c *client) expect(ctx context.Context, want int, method, path, key string, body, out any) error {
	st, raw, err := c.call(ctx, method, path, key, body, out)
	if err != nil {
		return err
	}
	if st != want {
		return fmt.Errorf("%s %s = %d, want %d: %s", method, path, st, want, clip(string(raw), 300))
	}
	return nil
}

// submit posts a task and returns its id (202).
func (c *client) submit(ctx context.Context, key string, body any) (string, error) {
	var r struct {
		TaskID string `json:"task_id"`
	}
	if err := c.expect(ctx, http.StatusAccepted, http.MethodPost, "/tasks", key, body, &r); err != nil {
		return "", err
	}
	if r.TaskID == "" {
		return "", fmt.Errorf("POST /tasks: no task_id in the reply")
	}
	return r.TaskID, nil
}

// get reads a task view.
func (c *client) get(ctx context.Context, id string) (*TaskView, error) {
	var v TaskView
	if err := c.expect(ctx, http.StatusOK, http.MethodGet, "/tasks/"+id, "", nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// await polls the task until its state is one of states, failing on
// another terminal state or when ctx ends (the last state is named).
func (c *client) await(ctx context.Context, id string, states ...string) (*TaskView, error) {
	return c.watch(ctx, id, nil, states...)
}

// watch is await calling seen (if set) with each new state observed.
func (c *client) watch(ctx context.Context, id string, seen func(*TaskView), states ...string) (*TaskView, error) {
	last := ""
	for {
		v, err := c.get(ctx, id)
		if err == nil {
			if seen != nil && v.State != last {
				seen(v)
			}
			last = v.State
			if slices.Contains(states, v.State) {
				return v, nil
			}
			if terminal(v.State) {
				return v, fmt.Errorf("task %s is %s, want %v%s", id, v.State, states, reviewNote(v))
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("task %s: still %q, want %v: %w", id, last, states, ctx.Err())
		case <-time.After(c.poll):
		}
	}
}

func terminal(s string) bool {
	switch s {
	case "completed", "failed", "cancelled", "rejected", "needs_review":
		return true
	}
	return false
}

func reviewNote(v *TaskView) string {
	if v.Review != nil {
		return " (review " + v.Review.Reason + ": " + clip(v.Review.Summary, 200) + ")"
	}
	if v.Error != nil {
		return " (" + v.Error.Class + ": " + clip(v.Error.Message, 200) + ")"
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
