package local_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/stack"
)

// The template's schedule becomes a Ticker that runs at start, then on its
// period, one run at a time, with a Scheduler payload and a Lambda context.
func TestTicker(t *testing.T) {
	t.Parallel()
	tpl := stack.MustLoadDefault()
	var sched stack.Schedule
	for _, s := range tpl.Schedules() {
		if s.Function == "ReconcilerFunction" {
			sched = s
		}
	}
	tk, err := local.ScheduleTicker(sched, tpl.Functions()["ReconcilerFunction"])
	if err != nil {
		t.Fatal(err)
	}
	if tk.Every != time.Minute || !tk.RunAtStart || tk.Timeout != 60*time.Second {
		t.Fatalf("ticker from template = every %v, at start %t, timeout %v; want 1m, true, 60s", tk.Every, tk.RunAtStart, tk.Timeout)
	}
	tk.Every = 50 * time.Millisecond

	var (
		mu       sync.Mutex
		events   []map[string]any
		inFlight atomic.Int32
		overlap  atomic.Bool
	)
	tk.Deliver = func(ctx context.Context, ev json.RawMessage) error {
		if inFlight.Add(1) > 1 {
			overlap.Store(true)
		}
		defer inFlight.Add(-1)
		if lc, ok := lambdacontext.FromContext(ctx); !ok || lc.AwsRequestID == "" {
			t.Errorf("run without a lambdacontext request id")
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 60*time.Second || time.Until(dl) < 55*time.Second {
			t.Errorf("run deadline in %v, want about 60s", time.Until(dl))
		}
		var m map[string]any
		if err := json.Unmarshal(ev, &m); err != nil {
			t.Errorf("event is not JSON: %v", err)
		}
		mu.Lock()
		events = append(events, m)
		mu.Unlock()
		time.Sleep(120 * time.Millisecond) // longer than the period: ticks must be dropped, not overlap
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	eventually(t, 10*time.Second, "three runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) >= 3
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if overlap.Load() {
		t.Error("runs overlapped")
	}
	mu.Lock()
	defer mu.Unlock()
	ev := events[0]
	if ev["source"] != "aws.scheduler" || ev["detail-type"] != "Scheduled Event" || ev["detail"] != "{}" {
		t.Errorf("event = %v, want a Scheduler payload like events/scheduler-tick.json", ev)
	}
	if _, err := time.Parse(time.RFC3339, ev["time"].(string)); err != nil {
		t.Errorf("event time %v: %v", ev["time"], err)
	}
}
