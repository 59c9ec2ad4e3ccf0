package faultinject

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Step is one scripted fault of a Plan: the N-th call of Service.Operation
// for the task gets Kind.
type Step struct {
	Service   string
	Operation string
	N         int
	Kind      Kind
}

// Plan scripts faults per task. It is safe for concurrent use.
type Plan struct {
	mu    sync.RWMutex
	steps map[string][]Step
}

// NewPlan returns an empty Plan.
func NewPlan() *Plan { return &Plan{steps: map[string][]Step{}} }

// Add scripts s for taskID. N <= 0 is read as 1.
func (p *Plan) Add(taskID string, s Step) {
	if s.N <= 0 {
		s.N = 1
	}
	p.mu.Lock()
	p.steps[taskID] = append(p.steps[taskID], s)
	p.mu.Unlock()
}

// Decide returns the scripted fault of c, if any.
func (p *Plan) Decide(c Call) Kind {
	if c.TaskID == "" {
		return ""
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, s := range p.steps[c.TaskID] {
		if s.N == c.N && s.Service == c.Service && s.Operation == c.Operation {
			return s.Kind
		}
	}
	return ""
}

// Rule gives a fault kind a probability per matching call.
type Rule struct {
	// Service and Operation select calls; "" matches any.
	Service   string
	Operation string
	Kind      Kind
	// Rate is the probability in [0, 1].
	Rate float64
}

func (r Rule) matches(c Call) bool {
	return (r.Service == "" || r.Service == c.Service) && (r.Operation == "" || r.Operation == c.Operation)
}

// Rates draws faults with per-rule probabilities. The draw is a hash of
// (Seed, rule index, service, operation, task id, N): the same task's N-th
// call of an operation gets the same answer in every run with the same seed,
// whatever the interleaving. The first matching rule whose draw hits wins.
type Rates struct {
	Seed  int64
	Rules []Rule
}

// Decide draws the fault of c.
func (r Rates) Decide(c Call) Kind {
	for i, rule := range r.Rules {
		if rule.Rate <= 0 || !rule.matches(c) {
			continue
		}
		if Draw(r.Seed, strconv.Itoa(i), c.Service, c.Operation, c.TaskID, strconv.Itoa(c.N)) < rule.Rate {
			return rule.Kind
		}
	}
	return ""
}

// ParseRules parses a spec such as
// "DynamoDB.*:throttle=0.01,SQS.SendMessage:send_failure=0.02,DynamoDB.PutItem:lost_reply=0.005".
// "*" (or an empty part) matches any service or operation.
func ParseRules(spec string) ([]Rule, error) {
	var out []Rule
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		target, fault, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("faultinject: rule %q: want Service.Operation:kind=rate", item)
		}
		svc, op, _ := strings.Cut(target, ".")
		kindS, rateS, ok := strings.Cut(fault, "=")
		if !ok {
			return nil, fmt.Errorf("faultinject: rule %q: want kind=rate", item)
		}
		k := Kind(strings.TrimSpace(kindS))
		if k != Throttle && k != SendFailure && k != LostReply {
			return nil, fmt.Errorf("faultinject: rule %q: unknown kind %q (throttle, send_failure, lost_reply)", item, k)
		}
		rate, err := strconv.ParseFloat(strings.TrimSpace(rateS), 64)
		if err != nil || rate < 0 || rate > 1 {
			return nil, fmt.Errorf("faultinject: rule %q: rate must be a number from 0 to 1", item)
		}
		if svc == "*" {
			svc = ""
		}
		if op == "*" {
			op = ""
		}
		out = append(out, Rule{Service: svc, Operation: op, Kind: k, Rate: rate})
	}
	return out, nil
}

// Chain consults its schedules in order; the first fault wins.
type Chain []Schedule

// Decide returns the first non-empty decision.
func (ch Chain) Decide(c Call) Kind {
	for _, s := range ch {
		if s == nil {
			continue
		}
		if k := s.Decide(c); k != "" {
			return k
		}
	}
	return ""
}

// Draw returns a uniform number in [0, 1) determined by seed and parts.
func Draw(seed int64, parts ...string) float64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}
