package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// progress is a count that grows, and waits for it: what the cost runs
// wait on (records settled, heartbeats made) instead of sleeping.
type progress struct {
	what    string
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

func newProgress(what string) *progress { return &progress{what: what, changed: make(chan struct{})} }

// add grows the count by k and returns it.
func (p *progress) add(k int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += k
	close(p.changed)
	p.changed = make(chan struct{})
	return p.n
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// await returns once the count is at least n, or with an error after a
// minute without growth (or when ctx ends).
func (p *progress) await(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		got, changed := p.n, p.changed
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-time.After(time.Minute):
			return fmt.Errorf("bench: %d of %d %s after a minute without progress", got, n, p.what)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
