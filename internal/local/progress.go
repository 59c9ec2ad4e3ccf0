package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// progress writes human progress lines. Safe for concurrent use; a nil
// writer discards.
type progress struct {
	mu sync.Mutex
	w  io.Writer

	// totals of worker outcomes since start (from the batch EMF records).
	totals map[string]int
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, totals: map[string]int{}}
}

func (p *progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// workerOutcomes are the worker's per-batch EMF metric names, in the order
// progress lines list them, with the word printed for each.
var workerOutcomes = []struct{ metric, word string }{
	{"Completed", "completed"},
	{"Retried", "retry_wait"},
	{"Failed", "failed"},
	{"Parked", "needs_review"},
	{"Unknown", "unknown"},
	{"AckedDuplicate", "duplicate"},
	{"Poison", "poison"},
	{"Fenced", "fenced"},
	{"Deferred", "deferred"},
}

// metricsSink is the io.Writer behind the worker's metrics.Writer: it reads
// the EMF records line by line and turns each batch record into a progress
// line ("worker: batch of 3 → 2 completed, 1 retry_wait").
type metricsSink struct {
	p   *progress
	mu  sync.Mutex
	buf []byte
}

func (s *metricsSink) Write(b []byte) (int, error) {
	s.mu.Lock()
	s.buf = append(s.buf, b...)
	var lines [][]byte
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, append([]byte(nil), s.buf[:i]...))
		s.buf = s.buf[i+1:]
	}
	s.mu.Unlock()
	for _, l := range lines {
		s.record(l)
	}
	return len(b), nil
}

func (s *metricsSink) record(line []byte) {
	var rec map[string]any
	if json.Unmarshal(line, &rec) != nil || rec["Service"] != "worker" {
		return
	}
	n, ok := rec["Records"].(float64)
	if !ok {
		return // a per-call provider record
	}
	var parts []string
	s.p.mu.Lock()
	for _, o := range workerOutcomes {
		if v, _ := rec[o.metric].(float64); v > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", int(v), o.word))
			s.p.totals[o.word] += int(v)
		}
	}
	s.p.mu.Unlock()
	line2 := fmt.Sprintf("worker: batch of %d → %s", int(n), strings.Join(parts, ", "))
	if f, _ := rec["ItemFailures"].(float64); f > 0 {
		line2 += fmt.Sprintf(" (%d back to the queue)", int(f))
	}
	s.p.printf("%s", line2)
}

// reconcilerLine describes a run that did something; "" for an idle run.
func reconcilerLine(s reconciler.Summary, err error) string {
	var parts []string
	add := func(n int, word string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, word))
		}
	}
	add(s.Requeued, "requeued")
	add(s.Resent, "re-sent")
	add(s.ExpiredToUnknown, "expired to unknown")
	add(s.Completed, "completed from readback")
	add(s.Parked, "parked")
	add(s.PoisonMessages, "poison messages to review")
	add(s.SendErrors, "send errors")
	add(s.Errors, "errors")
	if err != nil && s.Errors == 0 {
		parts = append(parts, "failed: "+err.Error())
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("reconciler: examined %d → %s (%d ms)", s.Examined, strings.Join(parts, ", "), s.DurationMs)
}

// status is the periodic one-line summary.
type status struct {
	live    map[ledger.State]int
	reviews int
	more    bool // open reviews is a lower bound
	// pending: submitted tasks whose watch items the reconciler has not
	// read yet (tasklist.WatchPending), in no live count until it adopts
	// them; -1 without a watch table.
	pending int
}

func (s status) String() string {
	var b strings.Builder
	b.WriteString("status: live")
	for _, st := range liveStates {
		fmt.Fprintf(&b, " %s=%d", st, s.live[st])
	}
	if s.pending >= 0 {
		fmt.Fprintf(&b, "; submitted, not yet checked=%d", s.pending)
	}
	plus := ""
	if s.more {
		plus = "+"
	}
	fmt.Fprintf(&b, "; open reviews=%d%s", s.reviews, plus)
	return b.String()
}

var liveStates = []ledger.State{ledger.StateActive, ledger.StateRetryWait, ledger.StateUnknown}

// readStatus counts live tasks per state (the sparse index, one COUNT
// query per shard), the submitted tasks the reconciler has not checked
// yet (with a watch table: queued or running, and in no live count until
// it adopts them; the cursors' query and one COUNT query per shard) and
// open review items (up to 10 pages).
func readStatus(ctx context.Context, l *ledger.Ledger) (status, error) {
	st := status{live: map[ledger.State]int{}, pending: -1}
	for _, s := range liveStates {
		for shard := range l.Config().Shards {
			n, err := tasklist.CountLive(ctx, l, s, shard)
			if err != nil {
				return st, err
			}
			st.live[s] += n
		}
	}
	if l.Config().WatchTable != "" {
		n, _, err := tasklist.WatchPending(ctx, l)
		if err != nil {
			return st, err
		}
		st.pending = n
	}
	cursor := ""
	for page := 0; page < 10; page++ {
		items, next, err := tasklist.ListOpenReviews(ctx, l, 100, cursor)
		if err != nil {
			return st, err
		}
		st.reviews += len(items)
		if next == "" {
			return st, nil
		}
		cursor = next
	}
	st.more = true
	return st, nil
}

// statusLoop prints the status line every period while it changes.
func (p *progress) statusLoop(ctx context.Context, l *ledger.Ledger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, every)
		st, err := readStatus(qctx, l)
		cancel()
		if ctx.Err() != nil {
			return
		}
		line := st.String()
		if err != nil {
			line = "status: unavailable: " + err.Error()
		}
		p.mu.Lock()
		if len(p.totals) > 0 {
			var keys []string
			for k := range p.totals {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s=%d", k, p.totals[k]))
			}
			line += "; worker totals " + strings.Join(parts, " ")
		}
		p.mu.Unlock()
		if line != last {
			p.printf("%s", line)
			last = line
		}
	}
}

// statusRecorder captures the status and Location of a response.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// logRequests prints one progress line per state-changing API call (not
// per GET: the page polls) and per server error.
func (p *progress) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		api := strings.HasPrefix(r.URL.Path, "/tasks") || strings.HasPrefix(r.URL.Path, "/reviews")
		mutating := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
		if !(api && mutating) && code < 500 {
			return
		}
		line := fmt.Sprintf("http: %s %s → %d", r.Method, r.URL.Path, code)
		if loc := rec.Header().Get("Location"); loc != "" {
			line += " " + strings.TrimPrefix(loc, "/tasks/")
		}
		if rec.Header().Get("Idempotent-Replayed") == "true" {
			line += " (replayed)"
		}
		p.printf("%s (%d ms)", line, time.Since(start).Milliseconds())
	})
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
