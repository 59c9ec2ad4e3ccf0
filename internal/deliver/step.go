package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Kind is the task kind a Step runs.
const Kind = destination.KindDeliver

// ErrNotYetVisible is a readback that did not find the delivery where
// "not found" is not credible evidence (the destination's readback may
// lag) and the destination is not idempotent: the task stays unknown and
// is read back again; it is never re-sent on this evidence.
var ErrNotYetVisible = errors.New("deliver: the destination does not show the delivery (yet); its absence is not credible evidence")

// ErrAbsent marks a readback that credibly found nothing (the destination
// declares its "not found" credible): the delivery never happened. It
// comes wrapped with contract.ErrNotFound; a re-queue that is only safe
// because the destination is idempotent carries contract.ErrNotFound
// without it (the delivery may have happened).
var ErrAbsent = errors.New("deliver: the destination credibly has no such delivery")

// Step is one deliver task's destination seen as a provider (see the
// package doc). It is safe for concurrent use.
type Step struct {
	d             destination.Destination
	in            destination.DeliverInput
	g             destination.Guarantees
	taskID        string
	correlationID string
	provenance    *destination.Provenance
}

// Task is what Bind needs of a deliver task.
type Task struct {
	TaskID        string
	CorrelationID string
	Input         string
	// Provenance is where the task came from (ProvenanceOf); required: a
	// delivery never reaches a receiver without it.
	Provenance *destination.Provenance
}

// Bind binds the deliver task t to its destination in reg. A task that
// cannot be bound (invalid input, unknown destination or params, no
// registry) gets a Step that refuses every call with the reason, so the
// worker fails it (invalid input) or parks it (not configured) like any
// other refusal; Bind never returns nil.
func Bind(reg *Registry, t Task) contract.Provider {
	in, err := destination.ParseDeliverInput(json.RawMessage(t.Input))
	if err != nil {
		return refused{name: Kind, err: err}
	}
	if t.Provenance == nil {
		return refused{name: in.Destination, err: retrypolicy.Permanent(fmt.Errorf("deliver: task %s names no provenance: its receiver could not tell an approved delivery from a direct one", t.TaskID))}
	}
	if err := t.Provenance.Validate(); err != nil {
		return refused{name: in.Destination, err: retrypolicy.Permanent(fmt.Errorf("deliver: task %s: %w", t.TaskID, err))}
	}
	if reg == nil || reg.r == nil {
		return refused{name: in.Destination, err: retrypolicy.Misconfigured(fmt.Errorf("deliver: task %s: no destinations are configured", t.TaskID))}
	}
	d, err := reg.r.Get(in.Destination)
	if err != nil {
		// Known at submit, gone now: the configuration changed. A person
		// restores it (or resolves the task); the input is not at fault.
		return refused{name: in.Destination, err: retrypolicy.Misconfigured(fmt.Errorf("deliver: task %s: %w", t.TaskID, errors.Unwrap(err)))}
	}
	g, err := destination.GuaranteesOf(d, in.Params)
	if err != nil {
		return refused{name: in.Destination, err: err}
	}
	p := *t.Provenance
	return &Step{d: d, in: in, g: g, taskID: t.TaskID, correlationID: t.CorrelationID, provenance: &p}
}

// Name returns the destination's name.
func (s *Step) Name() string { return s.d.Name() }

// Guarantees returns the destination's guarantees for this delivery.
func (s *Step) Guarantees() destination.Guarantees { return s.g }

// HonoursIdempotencyKey reports whether the destination deduplicates by
// operation id for this delivery.
func (s *Step) HonoursIdempotencyKey() bool { return s.g.Idempotent }

// OffersReadback reports whether the destination can be read back.
func (s *Step) OffersReadback() bool { return s.g.Mode() != destination.ReadbackNone }

func (s *Step) request(attempt int) destination.Request {
	return destination.Request{
		OperationID:   s.taskID,
		Attempt:       attempt,
		Destination:   s.in.Destination,
		Params:        s.in.Params,
		Payload:       s.in.Payload,
		PayloadSHA256: destination.HashPayload(s.in.Payload),
		CorrelationID: s.correlationID,
		Provenance:    s.provenance,
	}
}

// Generate delivers once; the output is the receipt as JSON. Errors are the
// destination's, steered with pkg/retrypolicy.
func (s *Step) Generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	if req.OperationID != "" && req.OperationID != s.taskID {
		return contract.Result{}, retrypolicy.Permanent(fmt.Errorf("deliver: operation %s is not the bound task %s", req.OperationID, s.taskID))
	}
	rc, err := s.d.Deliver(ctx, s.request(req.Attempt))
	if err != nil {
		return contract.Result{}, err
	}
	return s.result(rc)
}

// Lookup reads the delivery back and decides (destination.Resolve) in the
// provider's readback vocabulary (see the package doc).
func (s *Step) Lookup(ctx context.Context, operationID string) (contract.Result, error) {
	if operationID != s.taskID {
		return contract.Result{}, fmt.Errorf("deliver: lookup of %s on the step of %s", operationID, s.taskID)
	}
	rc, dec, err := destination.Resolve(ctx, s.d, s.request(0), false)
	switch dec.Action {
	case destination.Complete:
		return s.result(rc)
	case destination.Requeue:
		if s.g.NotFoundCredible && s.g.Mode() != destination.ReadbackNone {
			// Decide re-queues a credible "not found" before looking at
			// idempotency: the readback proved absence.
			return contract.Result{}, fmt.Errorf("%s %s: %w: %w", s.Name(), dec.Why, ErrAbsent, contract.ErrNotFound)
		}
		return contract.Result{}, fmt.Errorf("%s %s: %w", s.Name(), dec.Why, contract.ErrNotFound)
	case destination.Park:
		return contract.Result{}, fmt.Errorf("%s: %s: %w", s.Name(), dec.Why, contract.ErrNoReadback)
	}
	if err != nil {
		return contract.Result{}, fmt.Errorf("%s: %s: %w", s.Name(), dec.Why, err)
	}
	return contract.Result{}, fmt.Errorf("%s: %w (%s)", s.Name(), ErrNotYetVisible, s.g)
}

// result completes a receipt with what the step knows and encodes it.
func (s *Step) result(rc destination.Receipt) (contract.Result, error) {
	if rc.OperationID == "" {
		rc.OperationID = s.taskID
	}
	if rc.PayloadSHA256 == "" {
		rc.PayloadSHA256 = destination.HashPayload(s.in.Payload)
	}
	if rc.Destination == "" {
		rc.Destination = s.Name()
	}
	out, err := json.Marshal(rc)
	if err != nil {
		return contract.Result{}, retrypolicy.Uncertain(fmt.Errorf("deliver: encode receipt of %s: %w", s.taskID, err))
	}
	return contract.Result{Output: out, Provider: rc.Destination, ProviderRef: rc.ProviderRef}, nil
}

// refused is the step of a task that cannot be bound.
type refused struct {
	name string
	err  error
}

func (r refused) Name() string { return r.name }

func (r refused) Generate(context.Context, contract.Request) (contract.Result, error) {
	return contract.Result{}, r.err
}

func (r refused) Lookup(context.Context, string) (contract.Result, error) {
	return contract.Result{}, fmt.Errorf("%s: %w", r.err.Error(), contract.ErrNoReadback)
}

// ReceiptOf decodes a deliver task's result (its receipt); ok=false when
// result is empty or not a receipt.
func ReceiptOf(result string) (destination.Receipt, bool) {
	var rc destination.Receipt
	if result == "" || json.Unmarshal([]byte(result), &rc) != nil || rc.OperationID == "" {
		return destination.Receipt{}, false
	}
	return rc, true
}
