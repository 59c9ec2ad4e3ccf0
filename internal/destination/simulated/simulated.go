package simulated

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// The simulated destinations' names.
const (
	// Notify sends one notification to a recipient (params {"to":...});
	// read back by operation id.
	Notify = "notify"
	// Publish publishes the payload at a canonical URL (params
	// {"slug":...}); read back by fetching the URL and comparing the
	// content hash.
	Publish = "publish"
	// CRM creates a record with a client reference (params
	// {"client_reference":...}, default the operation id); read back by
	// looking the reference up.
	CRM = "crm"
)

// PublicBase is the root of the simulated publisher's canonical URLs.
const PublicBase = "https://publish.simulated.invalid/"

// DefaultThrottleRetryAfter is the Retry-After of the Throttle fault.
const DefaultThrottleRetryAfter = 2 * time.Second

// Options configure a simulated destination. The zero value is fault-free,
// not idempotent, immediately consistent, seed 0.
type Options struct {
	// Seed makes references and rate-drawn faults reproducible.
	Seed int64
	// Faults are drawn per call from a hash of (seed, operation id, attempt).
	Faults FaultPlan
	// Now is the clock (a settable test clock); time.Now if nil.
	Now func() time.Time
	// ReadbackDelay makes a delivery visible to Lookup only this long after
	// it happened, as a CDN or a search index would; until then Lookup
	// answers ErrNotFound.
	ReadbackDelay time.Duration
	// ThrottleRetryAfter is the Throttle fault's Retry-After;
	// DefaultThrottleRetryAfter if 0.
	ThrottleRetryAfter time.Duration
	// Guarantees, when set, replaces the declared guarantees (see
	// DefaultGuarantees). Idempotent makes the destination deduplicate by
	// operation id; Readback none makes Lookup answer ErrNoReadback.
	Guarantees *destination.Guarantees
}

// DefaultGuarantees are what a simulated destination declares without
// Options.Guarantees: not idempotent, readback by operation id (notify) or
// by reference (publish, crm), and a credible "not found" only when there
// is no readback delay.
func DefaultGuarantees(name string, readbackDelay time.Duration) destination.Guarantees {
	g := destination.Guarantees{Readback: destination.ReadbackByReference, NotFoundCredible: readbackDelay <= 0}
	if name == Notify {
		g.Readback = destination.ReadbackByOperationID
	}
	return g
}

// Delivery is one side effect the destination performed.
type Delivery struct {
	OperationID   string
	PayloadSHA256 string
	// Key is the readback key: the operation id (notify), the slug
	// (publish) or the client reference (crm).
	Key string
	// Ref is the destination's id for it.
	Ref string
	// Provenance is where the delivery said it came from (the request's;
	// nil when it named none).
	Provenance *destination.Provenance
	// At is when it happened; VisibleAt when Lookup starts seeing it.
	At, VisibleAt time.Time
}

type op struct {
	calls       int
	sideEffects int
	first       *Delivery
	script      []Fault
}

// Destination is a simulated destination. It is safe for concurrent use.
type Destination struct {
	name string
	opts Options
	g    destination.Guarantees

	mu    sync.Mutex
	ops   map[string]*op
	byKey map[string]*Delivery // latest delivery per readback key
	total int
}

// New returns the simulated destination name (Notify, Publish or CRM).
func New(name string, opts Options) (*Destination, error) {
	switch name {
	case Notify, Publish, CRM:
	default:
		return nil, fmt.Errorf("simulated destination: unknown name %q (want %s, %s or %s)", clip(name, 40), Notify, Publish, CRM)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ThrottleRetryAfter <= 0 {
		opts.ThrottleRetryAfter = DefaultThrottleRetryAfter
	}
	g := DefaultGuarantees(name, opts.ReadbackDelay)
	if opts.Guarantees != nil {
		g = *opts.Guarantees
		if !g.Mode().Valid() {
			return nil, fmt.Errorf("simulated destination: unknown readback mode %q", clip(string(g.Readback), 40))
		}
	}
	return &Destination{name: name, opts: opts, g: g, ops: map[string]*op{}, byKey: map[string]*Delivery{}}, nil
}

// All returns notify, publish and crm with the same options.
func All(opts Options) []destination.Destination {
	var out []destination.Destination
	for _, n := range []string{Notify, Publish, CRM} {
		d, _ := New(n, opts) // the names are known
		out = append(out, d)
	}
	return out
}

// Name returns the destination's name.
func (d *Destination) Name() string { return d.name }

// Guarantees returns the declared guarantees.
func (d *Destination) Guarantees() destination.Guarantees { return d.g }

// String describes the configuration.
func (d *Destination) String() string {
	return fmt.Sprintf("simulated %s (seed=%d faults=%q readback_delay=%s %s)", d.name, d.opts.Seed, d.opts.Faults, d.opts.ReadbackDelay, d.g)
}

// Script queues faults for an operation: each later Deliver with this
// operation id consumes the next one. A script wins over the rates.
func (d *Destination) Script(operationID string, faults ...Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.opLocked(operationID)
	o.script = append(o.script, faults...)
}

// SideEffects returns how many deliveries were performed for an operation.
func (d *Destination) SideEffects(operationID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.ops[operationID]; o != nil {
		return o.sideEffects
	}
	return 0
}

// First returns the first delivery performed for an operation — what its
// receiver was told, provenance included; ok=false when none was.
func (d *Destination) First(operationID string) (_ Delivery, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.ops[operationID]; o != nil && o.first != nil {
		return *o.first, true
	}
	return Delivery{}, false
}

// Calls returns how many Deliver calls for an operation reached the
// destination (valid requests).
func (d *Destination) Calls(operationID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o := d.ops[operationID]; o != nil {
		return o.calls
	}
	return 0
}

// TotalSideEffects returns how many deliveries were performed in all.
func (d *Destination) TotalSideEffects() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

// Snapshot returns the side effects per operation id, for every operation
// the destination was called for.
func (d *Destination) Snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.ops))
	for id, o := range d.ops {
		if o.calls > 0 {
			out[id] = o.sideEffects
		}
	}
	return out
}

type notifyParams struct {
	To string `json:"to"`
}

type publishParams struct {
	Slug string `json:"slug"`
}

type crmParams struct {
	ClientReference string `json:"client_reference"`
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,79}$`)

// CheckParams checks params as Deliver would (destination.ParamsChecker).
func (d *Destination) CheckParams(params json.RawMessage) error {
	_, err := d.key(destination.Request{OperationID: "check", Params: params})
	return err
}

// key parses req's params and returns the readback key.
func (d *Destination) key(req destination.Request) (string, error) {
	perr := func(field, problem string) error {
		return retrypolicy.Permanent(&destination.ParamsError{Destination: d.name, Field: field, Problem: problem})
	}
	switch d.name {
	case Notify:
		var p notifyParams
		if err := destination.ParseParams(d.name, req.Params, &p); err != nil {
			return "", err
		}
		if p.To == "" || len(p.To) > 254 {
			return "", perr("to", "is required, at most 254 characters")
		}
		return req.OperationID, nil
	case Publish:
		var p publishParams
		if err := destination.ParseParams(d.name, req.Params, &p); err != nil {
			return "", err
		}
		if !slugRE.MatchString(p.Slug) {
			return "", perr("slug", "is required: 1 to 80 lowercase letters, digits or '-', starting with a letter or digit")
		}
		return p.Slug, nil
	default:
		var p crmParams
		if err := destination.ParseParams(d.name, req.Params, &p); err != nil {
			return "", err
		}
		if len(p.ClientReference) > 128 {
			return "", perr("client_reference", "is at most 128 characters")
		}
		if p.ClientReference == "" {
			return req.OperationID, nil
		}
		return p.ClientReference, nil
	}
}

// Deliver performs req, subject to the injected faults described in the
// package documentation.
func (d *Destination) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return destination.Receipt{}, retrypolicy.Retryable(fmt.Errorf("simulated %s: %w: %w", d.name, retrypolicy.ErrRequestNotSent, err))
	}
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	key, err := d.key(req)
	if err != nil {
		return destination.Receipt{}, err
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.opLocked(req.OperationID)
	o.calls++
	attempt := req.Attempt
	if attempt <= 0 {
		attempt = o.calls
	}
	fault := Fault("")
	if len(o.script) > 0 {
		fault, o.script = o.script[0], o.script[1:]
	} else if len(d.opts.Faults.Rates) > 0 {
		fault = d.opts.Faults.pick(d.draw(req.OperationID, attempt))
	}
	fe := &FaultError{Fault: fault, Destination: d.name, OperationID: req.OperationID}
	switch fault {
	case Throttle:
		fe.Status = &retrypolicy.StatusError{StatusCode: 429, RetryAfter: d.opts.ThrottleRetryAfter, Body: "simulated throttling"}
		return destination.Receipt{}, retrypolicy.Throttled(fe, d.opts.ThrottleRetryAfter)
	case ServerError:
		fe.Status = &retrypolicy.StatusError{StatusCode: 503, Body: "simulated server error"}
		return destination.Receipt{}, retrypolicy.Retryable(fe)
	case Reject:
		fe.Status = &retrypolicy.StatusError{StatusCode: 422, Body: "simulated rejection"}
		return destination.Receipt{}, retrypolicy.Permanent(fe)
	}

	dl := o.first
	if dl == nil || !d.g.Idempotent {
		dl = d.performLocked(o, req, sum, key)
	}
	if fault == AcceptLoseReply {
		return destination.Receipt{}, retrypolicy.Uncertain(fe)
	}
	return d.receipt(*dl), nil
}

// performLocked records one side effect.
func (d *Destination) performLocked(o *op, req destination.Request, sum, key string) *Delivery {
	o.sideEffects++
	d.total++
	now := d.opts.Now()
	dl := &Delivery{OperationID: req.OperationID, PayloadSHA256: sum, Key: key, Ref: d.ref(req.OperationID, o.sideEffects), At: now, VisibleAt: now.Add(d.opts.ReadbackDelay)}
	if req.Provenance != nil {
		p := *req.Provenance
		dl.Provenance = &p
	}
	if o.first == nil {
		o.first = dl
	}
	d.byKey[key] = dl
	return dl
}

func (d *Destination) receipt(dl Delivery) destination.Receipt {
	rc := destination.Receipt{
		OperationID:         dl.OperationID,
		PayloadSHA256:       dl.PayloadSHA256,
		Destination:         d.name,
		DestinationIdentity: "simulated:" + d.name,
		ProviderRef:         dl.Ref,
	}
	if d.name == Publish {
		rc.PublicURL = PublicBase + dl.Key
	}
	return rc
}

// ErrOtherContent is the publish readback of a canonical URL that shows
// content other than the delivery's. It is no evidence that the delivery
// never happened — a later delivery to the same slug may have overwritten
// it — so it is not destination.ErrNotFound (which the default guarantees
// declare credible): the lookup gave no answer, and the task stays unknown
// and is parked when its readback runs out, never re-sent.
var ErrOtherContent = errors.New("the canonical URL shows other content: the delivery may have been overwritten, its absence is not proven")

// Lookup reads a delivery back: notify by operation id, publish by fetching
// the canonical URL and comparing the content hash, crm by client
// reference. A delivery is visible Options.ReadbackDelay after it happened;
// before that, and when nothing was delivered under the key (no page at the
// URL), the answer is destination.ErrNotFound. A URL showing other content
// is ErrOtherContent, never ErrNotFound. With readback "none" declared it
// is destination.ErrNoReadback.
func (d *Destination) Lookup(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	if d.g.Mode() == destination.ReadbackNone {
		return destination.Receipt{}, destination.ErrNoReadback
	}
	if err := ctx.Err(); err != nil {
		return destination.Receipt{}, retrypolicy.Retryable(fmt.Errorf("simulated %s: lookup: %w", d.name, err))
	}
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	key, err := d.key(req)
	if err != nil {
		return destination.Receipt{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.opts.Now()
	dl := d.byKey[key]
	if dl == nil || now.Before(dl.VisibleAt) {
		return destination.Receipt{}, fmt.Errorf("simulated %s: operation %s: %w", d.name, req.OperationID, destination.ErrNotFound)
	}
	rc := d.receipt(*dl)
	rc.ReadbackAt = now.UTC()
	rc.ReadbackResult = destination.ReadbackFound
	switch d.name {
	case Publish:
		if dl.PayloadSHA256 != sum {
			return destination.Receipt{}, fmt.Errorf("simulated publish: operation %s: %s shows sha256 %s…: %w", req.OperationID, rc.PublicURL, dl.PayloadSHA256[:12], ErrOtherContent)
		}
		rc.OperationID = req.OperationID
		rc.ReadbackResult = destination.ReadbackContentMatch
	case CRM:
		if dl.OperationID != req.OperationID {
			return destination.Receipt{}, retrypolicy.Misconfigured(fmt.Errorf("simulated crm: client reference belongs to operation %s, not %s", dl.OperationID, req.OperationID))
		}
	}
	return rc, nil
}

// Visible returns the deliveries Lookup can see now, by key (for tests and
// the soak's checker).
func (d *Destination) Visible() map[string]Delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.opts.Now()
	out := map[string]Delivery{}
	for k, dl := range d.byKey {
		if !now.Before(dl.VisibleAt) {
			out[k] = *dl
		}
	}
	return out
}

func (d *Destination) opLocked(id string) *op {
	o := d.ops[id]
	if o == nil {
		o = &op{}
		d.ops[id] = o
	}
	return o
}

func (d *Destination) hash(opID string, n int, purpose string) []byte {
	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(d.opts.Seed))
	binary.BigEndian.PutUint64(b[8:], uint64(n))
	h.Write(b[:])
	h.Write([]byte(d.name + "\x00" + purpose + "\x00" + opID))
	return h.Sum(nil)
}

// draw returns a uniform number in [0, 1) from (seed, name, operation,
// attempt).
func (d *Destination) draw(opID string, attempt int) float64 {
	sum := d.hash(opID, attempt, "fault")
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

func (d *Destination) ref(opID string, n int) string {
	prefix := map[string]string{Notify: "ntf-", Publish: "pub-", CRM: "crm-"}[d.name]
	return prefix + hex.EncodeToString(d.hash(opID, n, "ref")[:6]) + "-" + strconv.Itoa(n)
}
