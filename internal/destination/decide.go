package destination

import (
	"context"
	"errors"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Action is what happens to a deliver task after an attempt or a readback.
type Action string

// The actions.
const (
	// Complete: the delivery happened (the attempt succeeded, or a readback
	// found it); save the receipt.
	Complete Action = "complete"
	// Retry: a transient failure, the destination did not act; retry_wait
	// with backoff (Retry-After honoured).
	Retry Action = "retry"
	// Fail: the request is at fault; the task ends failed.
	Fail Action = "fail"
	// Readback: the outcome is uncertain; stay unknown and ask the
	// destination (now, or again later).
	Readback Action = "readback"
	// Requeue: the outcome was uncertain, and sending again is proven safe
	// (a credible "not found", or an idempotent destination); queue a new
	// attempt.
	Requeue Action = "requeue"
	// Park: a person must decide (needs_review with Decision.Reason).
	Park Action = "park"
)

// Evidence is what a readback found.
type Evidence string

// The kinds of readback evidence.
const (
	// NotRead: no readback has been attempted.
	NotRead Evidence = ""
	// Found: the readback found the delivery.
	Found Evidence = "found"
	// NotFound: the readback did not find it (ErrNotFound).
	NotFound Evidence = "not_found"
	// Unreadable: the destination cannot tell (ErrNoReadback).
	Unreadable Evidence = "no_readback"
	// LookupFailed: the lookup itself failed (any other error).
	LookupFailed Evidence = "lookup_failed"
)

// EvidenceOf reduces a Lookup's error to Evidence (nil → Found).
func EvidenceOf(lookupErr error) Evidence {
	switch {
	case lookupErr == nil:
		return Found
	case errors.Is(lookupErr, ErrNotFound):
		return NotFound
	case errors.Is(lookupErr, ErrNoReadback):
		return Unreadable
	}
	return LookupFailed
}

// Park reasons.
const (
	// ReasonUnknownOutcome: the destination may have acted, and neither a
	// readback nor its guarantees make a re-send safe.
	ReasonUnknownOutcome = "unknown_outcome"
	// ReasonMisconfigured: endpoint, secret or permission is wrong.
	ReasonMisconfigured = "misconfigured"
)

// Situation is everything Decide looks at.
type Situation struct {
	// Guarantees of the destination for this delivery (GuaranteesOf).
	Guarantees Guarantees
	// Class is the classification of the last Deliver error (0 for success).
	Class retrypolicy.Class
	// Evidence is what the readback found, NotRead if none was attempted.
	// It only matters when Class is UnknownOutcome.
	Evidence Evidence
	// ReadbackExhausted: the time or tries allowed for readback are used up
	// (for example the age budget), so another readback is not an option.
	ReadbackExhausted bool
}

// Decision is Decide's answer.
type Decision struct {
	// Action is what to do.
	Action Action
	// Reason is the park reason for Park, empty otherwise.
	Reason string
	// Why explains the decision in a sentence an operator can read.
	Why string
}

// Decide states the rule of DESIGN.md §10: an uncertain outcome on a
// non-idempotent destination is never re-sent; it is read back, or parked
// unknown_outcome. It is pure. For an UnknownOutcome:
//
//	evidence      guarantees                         action
//	found         any                                complete
//	not_found     not_found_credible                 requeue
//	not_found     idempotent                         requeue
//	not_found     neither                            readback later; park when exhausted
//	no_readback   idempotent                         requeue
//	no_readback   not idempotent                     park unknown_outcome
//	lookup_failed any                                readback later; park when exhausted
//	not read      readback != none                   readback
//	not read      no readback, idempotent            requeue
//	not read      no readback, not idempotent        park unknown_outcome
//
// Other classes: success → complete, Transient → retry, PermanentInput →
// fail, PermanentConfig → park misconfigured.
func Decide(s Situation) Decision {
	g := s.Guarantees
	switch s.Class {
	case 0:
		return Decision{Action: Complete, Why: "the destination accepted the delivery"}
	case retrypolicy.Transient:
		return Decision{Action: Retry, Why: "the destination refused the delivery for now; it did not act"}
	case retrypolicy.PermanentInput:
		return Decision{Action: Fail, Why: "the destination rejected the request itself"}
	case retrypolicy.PermanentConfig:
		return Decision{Action: Park, Reason: ReasonMisconfigured, Why: "the destination's configuration, secret or permission is wrong"}
	case retrypolicy.UnknownOutcome:
	default:
		// An unknown class: treat it as the most dangerous one.
	}
	park := Decision{Action: Park, Reason: ReasonUnknownOutcome}
	switch s.Evidence {
	case Found:
		return Decision{Action: Complete, Why: "the readback found the delivery"}
	case NotFound:
		if g.NotFoundCredible {
			return Decision{Action: Requeue, Why: "the readback credibly found no delivery: sending again is safe"}
		}
		if g.Idempotent {
			return Decision{Action: Requeue, Why: "the destination deduplicates by operation id: sending again is harmless"}
		}
		if s.ReadbackExhausted {
			park.Why = "the readback never found the delivery, but its absence is not credible and the destination is not idempotent"
			return park
		}
		return Decision{Action: Readback, Why: "not found yet, but the destination's readback may lag: read back again later"}
	case Unreadable:
		if g.Idempotent {
			return Decision{Action: Requeue, Why: "the destination cannot be read back but deduplicates by operation id"}
		}
		park.Why = "the destination may have acted, cannot be read back and is not idempotent"
		return park
	case LookupFailed:
		if s.ReadbackExhausted {
			park.Why = "the readback kept failing and the destination may have acted"
			return park
		}
		return Decision{Action: Readback, Why: "the readback failed: read back again later"}
	}
	if g.Mode() != ReadbackNone {
		return Decision{Action: Readback, Why: "the outcome is uncertain: read the destination back"}
	}
	if g.Idempotent {
		return Decision{Action: Requeue, Why: "the outcome is uncertain but the destination deduplicates by operation id"}
	}
	park.Why = "the destination may have acted, has no readback and is not idempotent"
	return park
}

// Resolve reads an uncertain delivery back from d and decides, in one step:
// the reconciler's use of Lookup and Decide. The receipt is meaningful only
// when the decision is Complete.
func Resolve(ctx context.Context, d Destination, req Request, exhausted bool) (Receipt, Decision, error) {
	g, err := GuaranteesOf(d, req.Params)
	if err != nil {
		return Receipt{}, Decision{Action: Fail, Why: "the delivery's params are invalid"}, err
	}
	var rc Receipt
	var lerr error
	if g.Mode() != ReadbackNone {
		rc, lerr = Lookup(ctx, d, req)
	} else {
		lerr = ErrNoReadback
	}
	dec := Decide(Situation{Guarantees: g, Class: retrypolicy.UnknownOutcome, Evidence: EvidenceOf(lerr), ReadbackExhausted: exhausted})
	if EvidenceOf(lerr) == LookupFailed {
		return rc, dec, lerr
	}
	return rc, dec, nil
}
