package example

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/taskledger/taskledger/internal/destination/lambda"
)

// Record is what the function keeps per operation id: the effect itself.
type Record struct {
	OperationID    string
	Receipt        string
	PayloadSHA256  string
	ProvenanceType string
	CorrelationID  string
	ReceivedAt     time.Time
}

// Store keeps records. Implementations: DynamoDB (deployed) and Memory
// (local runs and tests).
type Store interface {
	// Put records rec unless a record with its operation id exists, in one
	// atomic step. It returns the record now stored and whether this call
	// created it. An error wrapping ErrStoreBusy means nothing was
	// written; any other error means the write's outcome is unknown.
	Put(ctx context.Context, rec Record) (stored Record, created bool, err error)
	// Get reads the record of an operation id consistently; found is false
	// when there is none.
	Get(ctx context.Context, operationID string) (rec Record, found bool, err error)
}

// ErrStoreBusy is a store refusal (throttling) that wrote nothing.
var ErrStoreBusy = errors.New("example: store busy, nothing written")

// Rejected is the contract's permanent refusal: the function did not act
// and never will for this event. Its errorType is "Rejected".
type Rejected struct{ Reason string }

func (e *Rejected) Error() string { return "rejected: " + e.Reason }

// Retryable is the contract's "not now": the function did not act. Its
// errorType is "Retryable".
type Retryable struct{ Reason string }

func (e *Retryable) Error() string { return "retryable: " + e.Reason }

// Reply is the function's answer.
type Reply struct {
	Receipt     string `json:"receipt,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
	// Duplicate: the operation was already recorded; this call did not act.
	Duplicate bool `json:"duplicate,omitempty"`
	// Found answers a lookup.
	Found *bool `json:"found,omitempty"`
}

// Handler is the function's handler; lambda.Start(h.Handle).
type Handler struct {
	Store Store
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// Log gets one line per event (ids and hashes only); nil: none.
	Log *slog.Logger
}

// Handle answers one deliver or lookup event.
func (h *Handler) Handle(ctx context.Context, ev lambda.Event) (Reply, error) {
	if strings.TrimSpace(ev.OperationID) == "" || len(ev.OperationID) > 256 {
		return Reply{}, &Rejected{Reason: "operation_id is required (at most 256 bytes)"}
	}
	switch ev.Action {
	case lambda.ActionDeliver:
		return h.deliver(ctx, ev)
	case lambda.ActionLookup:
		return h.lookup(ctx, ev.OperationID)
	}
	return Reply{}, &Rejected{Reason: fmt.Sprintf("unknown action %q (want deliver or lookup)", clip(ev.Action, 20))}
}

func (h *Handler) deliver(ctx context.Context, ev lambda.Event) (Reply, error) {
	if len(ev.Payload) == 0 {
		return Reply{}, &Rejected{Reason: "payload is required"}
	}
	sum := sha256.Sum256(ev.Payload)
	if hex.EncodeToString(sum[:]) != ev.PayloadSHA256 {
		return Reply{}, &Rejected{Reason: "payload_sha256 is not the hash of the payload"}
	}
	if ev.Provenance == nil || ev.Provenance.Validate() != nil {
		return Reply{}, &Rejected{Reason: "provenance is missing or incomplete"}
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	rec := Record{OperationID: ev.OperationID, Receipt: newReceipt(), PayloadSHA256: ev.PayloadSHA256,
		ProvenanceType: ev.Provenance.Type, CorrelationID: ev.CorrelationID, ReceivedAt: now().UTC()}
	stored, created, err := h.Store.Put(ctx, rec)
	if err != nil {
		if errors.Is(err, ErrStoreBusy) {
			return Reply{}, &Retryable{Reason: "the store is busy; nothing was recorded"}
		}
		// The write's outcome is unknown: an ordinary error, which the
		// destination reads as "may have acted" and resolves by lookup.
		return Reply{}, fmt.Errorf("record operation %s: %w", ev.OperationID, err)
	}
	if stored.PayloadSHA256 != ev.PayloadSHA256 {
		return Reply{}, &Rejected{Reason: "operation_id was already used for another payload"}
	}
	h.log(ctx, "deliver", ev.OperationID, "created", created, "payload_sha256", ev.PayloadSHA256, "provenance", ev.Provenance.Type)
	return Reply{Receipt: stored.Receipt, OperationID: ev.OperationID, Duplicate: !created}, nil
}

func (h *Handler) lookup(ctx context.Context, opID string) (Reply, error) {
	rec, found, err := h.Store.Get(ctx, opID)
	if err != nil {
		return Reply{}, &Retryable{Reason: "the store could not be read"}
	}
	h.log(ctx, "lookup", opID, "found", found)
	if !found {
		return Reply{Found: &found}, nil
	}
	return Reply{Found: &found, Receipt: rec.Receipt, OperationID: opID}, nil
}

func (h *Handler) log(ctx context.Context, action, opID string, kv ...any) {
	if h.Log == nil {
		return
	}
	h.Log.InfoContext(ctx, "example destination", append([]any{"action", action, "operation_id", opID}, kv...)...)
}

func newReceipt() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "ex_" + hex.EncodeToString(b)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
