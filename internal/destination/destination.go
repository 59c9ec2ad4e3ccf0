package destination

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// KindDeliver is the task kind whose step is a delivery to a destination.
const KindDeliver = "deliver"

// ReadbackMode says how a destination can be asked whether an operation
// happened.
type ReadbackMode string

// The readback modes.
const (
	// ReadbackNone: the destination cannot be asked.
	ReadbackNone ReadbackMode = "none"
	// ReadbackByOperationID: the destination can be asked by operation id
	// (the deliver task's id).
	ReadbackByOperationID ReadbackMode = "by_operation_id"
	// ReadbackByReference: the destination can be asked by a reference the
	// request carries (a canonical URL, a client reference).
	ReadbackByReference ReadbackMode = "by_reference"
)

// Valid reports whether m is one of the three modes.
func (m ReadbackMode) Valid() bool {
	return m == ReadbackNone || m == ReadbackByOperationID || m == ReadbackByReference
}

// Guarantees is what a destination promises about repeated and uncertain
// deliveries. The zero value promises nothing (not idempotent, no
// readback), which is the safe assumption.
type Guarantees struct {
	// Idempotent: the destination deduplicates by Request.OperationID, so a
	// re-send after an uncertain outcome cannot cause a second side effect.
	Idempotent bool `json:"idempotent"`
	// Readback is how the destination can be asked; "" reads as
	// ReadbackNone.
	Readback ReadbackMode `json:"readback"`
	// NotFoundCredible: a Lookup answering ErrNotFound is evidence that the
	// operation never committed (no eventual-consistency window), so a
	// re-send is safe.
	NotFoundCredible bool `json:"not_found_credible"`
}

// Mode returns g.Readback, with "" read as ReadbackNone.
func (g Guarantees) Mode() ReadbackMode {
	if g.Readback == "" {
		return ReadbackNone
	}
	return g.Readback
}

// String formats g for logs and review items.
func (g Guarantees) String() string {
	return fmt.Sprintf("idempotent=%t readback=%s not_found_credible=%t", g.Idempotent, g.Mode(), g.NotFoundCredible)
}

// Request is one attempt at a delivery.
type Request struct {
	// OperationID is the deliver task's id: the same for every attempt. A
	// destination that honours idempotency deduplicates by it; every
	// destination reports it in its Receipt.
	OperationID string
	// Attempt is the attempt number (1-based), for tracing only.
	Attempt int
	// Destination is the destination's name, as in the deliver input.
	Destination string
	// Params are the destination-specific parameters (a JSON object, or
	// empty); each destination parses them strictly.
	Params json.RawMessage
	// Payload is the JSON value delivered: the approved artifact.
	Payload json.RawMessage
	// PayloadSHA256 is the lowercase hex SHA-256 of the exact Payload bytes
	// (HashPayload). Empty means "compute it"; when set it must match
	// (Validate), so a receipt never names a hash of other bytes.
	PayloadSHA256 string
	// CorrelationID is the caller's correlation id, for tracing.
	CorrelationID string
	// Provenance is where the delivery came from; every destination
	// carries it to the receiver inside what it authenticates (the
	// signed webhook body, the event detail). The deliver step always
	// sets it (package deliver refuses a task without one).
	Provenance *Provenance
}

// HashPayload returns the lowercase hex SHA-256 of the exact bytes of p.
func HashPayload(p json.RawMessage) string {
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}

// Validate checks what every destination needs of a request: an operation
// id, a JSON payload and, when PayloadSHA256 is set, that it is the payload's
// hash. It returns the hash to report. Errors are retrypolicy.Permanent and
// never quote the payload.
func (r Request) Validate() (payloadSHA256 string, err error) {
	if strings.TrimSpace(r.OperationID) == "" {
		return "", retrypolicy.Permanent(errors.New("destination: request has no operation id"))
	}
	if len(r.Payload) == 0 || !json.Valid(r.Payload) {
		return "", retrypolicy.Permanent(fmt.Errorf("destination: operation %s: payload is not valid JSON (%d bytes)", r.OperationID, len(r.Payload)))
	}
	sum := HashPayload(r.Payload)
	if r.PayloadSHA256 != "" && !strings.EqualFold(r.PayloadSHA256, sum) {
		return "", retrypolicy.Permanent(fmt.Errorf("destination: operation %s: payload_sha256 %s is not the hash of the payload (%s)", r.OperationID, Clip(r.PayloadSHA256, 64), sum))
	}
	return sum, nil
}

// Readback results recorded on a Receipt.
const (
	// ReadbackFound: the destination confirmed the operation by its id or
	// reference.
	ReadbackFound = "found"
	// ReadbackContentMatch: the public object was read back and its content
	// hash is the payload's.
	ReadbackContentMatch = "content_hash_match"
)

// Receipt is the destination-side evidence of one delivery: every
// destination field of DESIGN.md §10's receipt (the approval fields,
// approved_by, approved_at and policy, are the ledger's).
type Receipt struct {
	// OperationID is the deliver task's id.
	OperationID string `json:"operation_id"`
	// PayloadSHA256 is the hash of the delivered payload (the approved
	// artifact).
	PayloadSHA256 string `json:"payload_sha256"`
	// Destination is the destination's name ("webhook", "notify", ...).
	Destination string `json:"destination"`
	// DestinationIdentity says where exactly it went: the endpoint host,
	// the bus ARN, the account.
	DestinationIdentity string `json:"destination_identity"`
	// ProviderRef is the destination's own id for the delivery, if it gave
	// one.
	ProviderRef string `json:"provider_ref,omitempty"`
	// PublicURL is where the delivered artifact can be seen, if anywhere.
	PublicURL string `json:"public_url,omitempty"`
	// ReadbackAt is when the delivery was read back; zero if it was not.
	ReadbackAt time.Time `json:"readback_at,omitzero"`
	// ReadbackResult is what the readback found (ReadbackFound,
	// ReadbackContentMatch); empty if there was no readback.
	ReadbackResult string `json:"readback_result,omitempty"`
}

// Destination performs the side-effecting step of a deliver task.
type Destination interface {
	// Name is the short stable name requests use, e.g. "webhook".
	Name() string
	// Guarantees is what the destination promises in general; see
	// GuaranteesFor for promises that depend on the request.
	Guarantees() Guarantees
	// Deliver performs req once. Its errors are steered with the
	// constructors of pkg/retrypolicy: Retryable/Throttled (transient: the
	// destination did not act), Permanent (the request is at fault),
	// Misconfigured (endpoint, secret, permission: park) and Uncertain (the
	// destination may have acted: never re-send blindly, see Decide).
	Deliver(ctx context.Context, req Request) (Receipt, error)
}

// Looker is the optional readback of a destination.
type Looker interface {
	// Lookup asks the destination whether the delivery req describes
	// happened, by operation id or by the reference req carries (whichever
	// the destination's readback mode uses). A found delivery returns its
	// Receipt with ReadbackAt and ReadbackResult set. ErrNotFound means the
	// destination does not have it (credible evidence only when
	// Guarantees.NotFoundCredible), ErrNoReadback that it cannot tell; any
	// other error (steered like Deliver's) means the lookup itself failed.
	Lookup(ctx context.Context, req Request) (Receipt, error)
}

// RequestGuarantees is optionally implemented by a destination whose
// promises depend on the request (a webhook's, on the endpoint named).
type RequestGuarantees interface {
	// GuaranteesFor returns the guarantees for a delivery with these
	// params; an error means the params are invalid (retrypolicy.Permanent).
	GuaranteesFor(params json.RawMessage) (Guarantees, error)
}

var (
	// ErrNotFound means the destination does not have the delivery.
	ErrNotFound = errors.New("destination: delivery not found")
	// ErrNoReadback means the destination cannot tell whether the delivery
	// happened.
	ErrNoReadback = errors.New("destination: no readback")
)

// ParamsChecker is optionally implemented by a destination that can check
// a delivery's params without delivering (at submit, before anything is
// written). Errors are a *ParamsError wrapped by retrypolicy.Permanent.
type ParamsChecker interface {
	CheckParams(params json.RawMessage) error
}

// CheckParams checks params for d: with d's ParamsChecker, else by its
// RequestGuarantees (which parse them); a destination with neither accepts
// any params here and checks them when it delivers.
func CheckParams(d Destination, params json.RawMessage) error {
	if pc, ok := d.(ParamsChecker); ok {
		if err := pc.CheckParams(params); err != nil {
			return err
		}
	}
	_, err := GuaranteesOf(d, params)
	return err
}

// GuaranteesOf returns d's guarantees for a delivery with params.
func GuaranteesOf(d Destination, params json.RawMessage) (Guarantees, error) {
	if rg, ok := d.(RequestGuarantees); ok {
		return rg.GuaranteesFor(params)
	}
	return d.Guarantees(), nil
}

// Lookup reads a delivery back from d, answering ErrNoReadback when d has no
// readback.
func Lookup(ctx context.Context, d Destination, req Request) (Receipt, error) {
	l, ok := d.(Looker)
	if !ok {
		return Receipt{}, ErrNoReadback
	}
	return l.Lookup(ctx, req)
}

// UnknownDestinationError is a request naming a destination the registry
// does not have. It is returned wrapped by retrypolicy.Permanent.
type UnknownDestinationError struct {
	// Name is the requested name (clipped).
	Name string
	// Known lists the registered names.
	Known []string
}

// Error names the destination and the known ones.
func (e *UnknownDestinationError) Error() string {
	return fmt.Sprintf("destination: unknown destination %q (configured: %s)", e.Name, strings.Join(e.Known, ", "))
}

// Registry maps names to destinations. It is read-only after NewRegistry and
// safe for concurrent use.
type Registry struct {
	byName map[string]Destination
}

// NewRegistry returns a registry of ds. Names must be valid (see
// ParseDeliverInput) and distinct.
func NewRegistry(ds ...Destination) (*Registry, error) {
	r := &Registry{byName: make(map[string]Destination, len(ds))}
	for _, d := range ds {
		if d == nil {
			return nil, errors.New("destination: nil destination")
		}
		name := d.Name()
		if !ValidName(name) {
			return nil, fmt.Errorf("destination: invalid destination name %q", Clip(name, 40))
		}
		if _, dup := r.byName[name]; dup {
			return nil, fmt.Errorf("destination: %q registered twice", name)
		}
		if g := d.Guarantees(); !g.Mode().Valid() {
			return nil, fmt.Errorf("destination: %s declares unknown readback mode %q", name, Clip(string(g.Readback), 40))
		}
		r.byName[name] = d
	}
	return r, nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Get returns the destination named name, or an *UnknownDestinationError
// wrapped by retrypolicy.Permanent.
func (r *Registry) Get(name string) (Destination, error) {
	if d, ok := r.byName[name]; ok {
		return d, nil
	}
	return nil, retrypolicy.Permanent(&UnknownDestinationError{Name: Clip(name, 40), Known: r.Names()})
}

// Clip cuts s to n bytes on a rune boundary, marking the cut with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// TransportFailure steers a call's failure that is no service error (err
// as the SDK returned it, wrapped with the operation): retryable when the
// request was never sent (a refused dial, a request that never left), else
// uncertain — a lost reply, a timeout, a reset, or one nobody can place:
// the destination may have acted.
func TransportFailure(err, wrapped error) error {
	switch retrypolicy.Classify(err).Reason {
	case "dial_error", "request_not_sent":
		return retrypolicy.Retryable(fmt.Errorf("%w: %w", retrypolicy.ErrRequestNotSent, wrapped))
	}
	return retrypolicy.Uncertain(wrapped)
}
