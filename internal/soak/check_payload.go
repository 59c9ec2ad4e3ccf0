package soak

import (
	"context"
	"time"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The S3 claim-check (DESIGN §12): rules on tasks whose input or result
// lives in the payload bucket.
//
//   - result_ref_not_winner: a completed task's result reference names
//     results/<task>/<created_ms>/<assignment_version> of the item's own
//     (winning) assignment — never a fenced-out worker's object;
//   - result_ref_unreadable: the object behind a result or input reference
//     exists and its size and SHA-256 are the reference's (payload.Get
//     verifies both);
//   - large_input_inline / small_input_offloaded: an input above the inline
//     threshold is kept in S3, one at or under it in the item.
//
// result_not_the_providers and stored_payload_not_accepted compare the
// resolved bytes, so they hold for offloaded payloads too.
func (c *checker) claimCheck(t *task, st *ledger.Task) {
	s := c.s
	if s.payloads == nil {
		return
	}
	if r := st.ResultRef; r != nil {
		if want := payload.ResultKey(st.TaskID, st.CreatedMs, st.AssignmentVersion); r.Key != want || r.Bucket != s.payloads.Bucket() {
			c.add(t.kind, t.id, "result_ref_not_winner", "the result reference names %s/%s, want %s (the item's assignment %d)", r.Bucket, r.Key, want, st.AssignmentVersion)
		}
		if _, err := s.load(r); err != nil {
			c.add(t.kind, t.id, "result_ref_unreadable", "the result object does not match its reference: %v", err)
		}
	}
	if r := st.InputRef; r != nil {
		if _, err := s.load(r); err != nil {
			c.add(t.kind, t.id, "result_ref_unreadable", "the input object does not match its reference: %v", err)
		}
	}
	if t.kind == LargeInput && st.InputRef != nil {
		// Its "fault" is the offload itself: counted once it happened
		// (check holds s.mu; the rows read injected after the loop).
		s.injected[LargeInput]++
	}
	switch in := len(t.input); {
	case !s.payloads.Inline(in) && st.InputRef == nil && t.kind == LargeInput:
		c.add(t.kind, t.id, "large_input_inline", "an input of about %d bytes is kept in the item", in)
	case s.payloads.Inline(in) && st.InputRef != nil && t.kind != KeyReusedPayload:
		c.add(t.kind, t.id, "small_input_offloaded", "an input of about %d bytes went to S3", in)
	}
}

// load reads a referenced object (verified) with the clean client.
func (s *soak) load(r *ledger.PayloadRef) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.payloads.Get(ctx, payload.Ref(*r))
}

// storedInput is a task's input, inline or read from the payload bucket
// ("" when it cannot be read: result_ref_unreadable reports that).
func (s *soak) storedInput(st *ledger.Task) string {
	if st.InputRef == nil || s.payloads == nil {
		return st.Input
	}
	b, err := s.load(st.InputRef)
	if err != nil {
		return ""
	}
	return string(b)
}

// storedResult is a task's result, inline or read from the payload bucket.
func (s *soak) storedResult(st *ledger.Task) string {
	if st.ResultRef == nil || s.payloads == nil {
		return st.Result
	}
	b, err := s.load(st.ResultRef)
	if err != nil {
		return ""
	}
	return string(b)
}
