package local

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// pauseSQS is the poller's SQS with a pause switch: while paused no
// ReceiveMessage is made (the messages wait in the queue, as they would
// behind a backlog or a disabled event source mapping).
type pauseSQS struct {
	PollerSQS

	mu       sync.Mutex
	cond     *sync.Cond
	paused   bool
	inFlight int
}

func newPauseSQS(c PollerSQS) *pauseSQS {
	p := &pauseSQS{PollerSQS: c}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *pauseSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	// A shutdown (ctx done) wakes a receive waiting out a pause.
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	for p.paused && ctx.Err() == nil {
		p.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	p.inFlight++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	return p.PollerSQS.ReceiveMessage(ctx, in, opts...)
}

// PausePoller stops the emulated event source mapping from receiving: it
// returns once no receive is in flight, so a message sent after it returns
// stays in the queue until ResumePoller. Invocations already running
// finish. (Demos and tests: "approved, then withdrawn before any worker
// picked the deliveries up".)
func (s *Stack) PausePoller() {
	p := s.pause
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for p.inFlight > 0 {
		p.cond.Wait()
	}
}

// ResumePoller lets the poller receive again.
func (s *Stack) ResumePoller() {
	p := s.pause
	p.mu.Lock()
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
