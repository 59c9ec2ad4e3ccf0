package simulated

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Fault is the name of an injected failure.
type Fault string

// The faults.
const (
	// AcceptLoseReply performs and records the delivery (a real side
	// effect), then returns retrypolicy.Uncertain as if the reply was lost.
	AcceptLoseReply Fault = "accept_lose_reply"
	// Throttle answers 429 with Retry-After: retrypolicy.Throttled; nothing
	// is delivered.
	Throttle Fault = "throttle"
	// ServerError answers 503: retrypolicy.Retryable; nothing is delivered.
	ServerError Fault = "server_error"
	// Reject answers 422: retrypolicy.Permanent; nothing is delivered.
	Reject Fault = "reject"
)

// Faults returns every fault, sorted by name.
func Faults() []Fault { return []Fault{AcceptLoseReply, Reject, ServerError, Throttle} }

// ParseFault returns the fault named s.
func ParseFault(s string) (Fault, error) {
	f := Fault(strings.TrimSpace(s))
	if !slices.Contains(Faults(), f) {
		names := make([]string, 0, 4)
		for _, f := range Faults() {
			names = append(names, string(f))
		}
		return "", fmt.Errorf("simulated destination: unknown fault %q (known: %s)", clip(s, 40), strings.Join(names, ", "))
	}
	return f, nil
}

// FaultPlan gives each fault a probability per call.
type FaultPlan struct {
	// Rates maps a fault to its probability in [0, 1]; they sum to at most 1.
	Rates map[Fault]float64
}

// ParseFaultPlan parses a spec such as "throttle=0.1,accept_lose_reply=0.05".
// The empty spec is the empty plan. Names must be known faults, each at most
// once; rates in [0, 1] summing to at most 1.
func ParseFaultPlan(spec string) (FaultPlan, error) {
	plan := FaultPlan{Rates: map[Fault]float64{}}
	sum := 0.0
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return FaultPlan{}, fmt.Errorf("simulated destination: fault plan item %q: want name=rate", clip(item, 40))
		}
		f, err := ParseFault(name)
		if err != nil {
			return FaultPlan{}, err
		}
		if _, dup := plan.Rates[f]; dup {
			return FaultPlan{}, fmt.Errorf("simulated destination: fault plan names %s twice", f)
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return FaultPlan{}, fmt.Errorf("simulated destination: rate for %s: want a number from 0 to 1, got %q", f, clip(val, 20))
		}
		plan.Rates[f] = r
		sum += r
	}
	if sum > 1+1e-9 {
		return FaultPlan{}, fmt.Errorf("simulated destination: fault rates sum to %g, more than 1", sum)
	}
	return plan, nil
}

// String formats the plan as a spec, in name order.
func (p FaultPlan) String() string {
	var parts []string
	for _, f := range Faults() {
		if r, ok := p.Rates[f]; ok {
			parts = append(parts, string(f)+"="+strconv.FormatFloat(r, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

func (p FaultPlan) pick(u float64) Fault {
	acc := 0.0
	for _, f := range Faults() {
		if r := p.Rates[f]; r > 0 {
			acc += r
			if u < acc {
				return f
			}
		}
	}
	return ""
}

// FaultError is the error an injected fault returns, inside the
// retrypolicy steering wrapper; it unwraps to its simulated status.
type FaultError struct {
	Fault       Fault
	Destination string
	OperationID string
	Status      *retrypolicy.StatusError
}

// Error names the fault, the destination, the operation and the status.
func (e *FaultError) Error() string {
	msg := "simulated " + e.Destination + " " + string(e.Fault) + " (operation " + e.OperationID + ")"
	if e.Status != nil {
		msg += ": " + e.Status.Error()
	}
	return msg
}

// Unwrap returns the simulated status, if any.
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
