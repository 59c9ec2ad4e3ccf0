package simulated

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Fault is the name of an injected failure. The names are also the legal
// values of the "simulate" field of a generate input.
type Fault string

// The faults.
const (
	// AcceptLoseReply performs and records the generation, then returns
	// retrypolicy.Uncertain as if the reply had been lost.
	AcceptLoseReply Fault = "accept_lose_reply"
	// Throttle returns a 429 with Retry-After: retrypolicy.Throttled.
	Throttle Fault = "throttle"
	// ServerError returns a 503: retrypolicy.Retryable.
	ServerError Fault = "server_error"
	// BadRequest returns a 400: retrypolicy.Permanent.
	BadRequest Fault = "bad_request"
	// Credentials returns a 401: retrypolicy.Misconfigured.
	Credentials Fault = "credentials"
	// Slow makes the call last Options.SlowDelay (honouring the context),
	// then succeed.
	Slow Fault = "slow"

	// Long makes the call last Options.LongDelay (honouring the context),
	// then succeed: a call that fits its timeout but is long relative to
	// what is left of a Lambda invocation. Script-only (Provider.Script):
	// it is not a legal "simulate" value.
	Long Fault = "long"
	// Oversized performs the generation with an output of more than
	// Options.OversizeBytes (default DefaultOversizeBytes, above DynamoDB's
	// 400 KB item limit). Script-only.
	Oversized Fault = "oversized"
)

// Faults returns every fault, sorted by name.
func Faults() []Fault {
	return []Fault{AcceptLoseReply, BadRequest, Credentials, ServerError, Slow, Throttle}
}

// ParseFault returns the fault named s.
func ParseFault(s string) (Fault, error) {
	f := Fault(strings.TrimSpace(s))
	if !slices.Contains(Faults(), f) {
		return "", fmt.Errorf("simulated: unknown fault %q (known: %s)", clip(s, 40), faultList())
	}
	return f, nil
}

func faultList() string {
	names := make([]string, 0, len(Faults()))
	for _, f := range Faults() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// String returns the fault's name.
func (f Fault) String() string { return string(f) }

// Permanent reports whether the fault is the caller's or the configuration's
// fault rather than a transient or uncertain one. A permanent fault named in
// an input's "simulate" field applies on every attempt; the others only on
// the first.
func (f Fault) Permanent() bool { return f == BadRequest || f == Credentials }

// FaultPlan gives each fault a probability per call.
type FaultPlan struct {
	// Rates maps a fault to its probability in [0, 1]; the rates' sum should
	// not exceed 1 (ParseFaultPlan enforces both). Faults are drawn in name
	// order, so with a sum above 1 the last faults are under-represented.
	Rates map[Fault]float64
}

// ParseFaultPlan parses a spec such as
// "throttle=0.1,server_error=0.05,accept_lose_reply=0.02". Whitespace around
// items is ignored; the empty spec is the empty plan. Names must be known
// faults, each at most once; rates must be in [0, 1] and sum to at most 1.
func ParseFaultPlan(spec string) (FaultPlan, error) {
	plan := FaultPlan{Rates: map[Fault]float64{}}
	if strings.TrimSpace(spec) == "" {
		return plan, nil
	}
	sum := 0.0
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return FaultPlan{}, fmt.Errorf("simulated: fault plan item %q: want name=rate", clip(item, 40))
		}
		f, err := ParseFault(name)
		if err != nil {
			return FaultPlan{}, err
		}
		if _, dup := plan.Rates[f]; dup {
			return FaultPlan{}, fmt.Errorf("simulated: fault plan names %s twice", f)
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return FaultPlan{}, fmt.Errorf("simulated: fault plan rate for %s: want a number from 0 to 1, got %q", f, clip(val, 20))
		}
		plan.Rates[f] = r
		sum += r
	}
	if sum > 1+1e-9 {
		return FaultPlan{}, fmt.Errorf("simulated: fault plan rates sum to %g, more than 1", sum)
	}
	return plan, nil
}

// String formats the plan as a spec ParseFaultPlan accepts, in name order.
func (p FaultPlan) String() string {
	var parts []string
	for _, f := range Faults() {
		if r, ok := p.Rates[f]; ok {
			parts = append(parts, string(f)+"="+strconv.FormatFloat(r, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

// pick returns the fault whose cumulative rate interval holds u in [0, 1),
// or "" for none.
func (p FaultPlan) pick(u float64) Fault {
	acc := 0.0
	for _, f := range Faults() {
		r := p.Rates[f]
		if r <= 0 {
			continue
		}
		acc += r
		if u < acc {
			return f
		}
	}
	return ""
}

// FaultError is the error an injected fault returns, inside the
// retrypolicy steering wrapper. It unwraps to its *retrypolicy.StatusError,
// if any.
type FaultError struct {
	// Fault is the injected fault.
	Fault Fault
	// OperationID is the request's operation id.
	OperationID string
	// Status is the simulated HTTP response, nil for faults without one.
	Status *retrypolicy.StatusError
}

// Error names the fault, the operation and the simulated status.
func (e *FaultError) Error() string {
	msg := "simulated " + string(e.Fault) + " (operation " + e.OperationID + ")"
	if e.Status != nil {
		msg += ": " + e.Status.Error()
	}
	return msg
}

// Unwrap returns the simulated status error, if any.
func (e *FaultError) Unwrap() error {
	if e.Status == nil {
		return nil
	}
	return e.Status
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
