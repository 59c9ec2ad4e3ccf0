package overview

import (
	"bytes"
	"encoding/json"
	"sort"
	"sync"
	"time"
)

// Minutes is how many per-minute buckets a series holds (the last one is
// the current, partial minute).
const Minutes = 15

// Series names and the EMF metrics each sums (with a scale: CostMicros is
// micro-dollars). Worker batch records carry Completed, Failed, Parked and
// Retried (dimension Service=worker); the reconciler's run record carries
// CompletedFromReadback and Parked (Function=reconciler); ProviderCalls is
// the worker's per-call record (Service=worker, Provider).
var SeriesMetrics = map[string][]Metric{
	"completed":      {{"Completed", 1}, {"CompletedFromReadback", 1}},
	"failed":         {{"Failed", 1}},
	"parked":         {{"Parked", 1}},
	"retried":        {{"Retried", 1}},
	"provider_calls": {{"ProviderCalls", 1}},
	"tokens":         {{"InputTokens", 1}, {"OutputTokens", 1}},
	"cost_usd":       {{"CostUSD", 1}, {"CostMicros", 1e-6}},
}

// UsageSeries stay null ("no data") until one of their metrics is seen: a
// worker that does not record usage is not a worker that used nothing. The
// other series count events, so a minute without one is 0.
var UsageSeries = map[string]bool{"tokens": true, "cost_usd": true}

// Metric is one EMF metric name summed into a series, times Scale.
type Metric struct {
	Name  string
	Scale float64
}

// Rates sums EMF metrics per UTC minute. It is an io.Writer of EMF lines
// (one JSON document a line, as internal/metrics writes them); lines that
// are not EMF are ignored. Safe for concurrent use.
type Rates struct {
	// Now is the clock (default time.Now); buckets older than Minutes are
	// dropped.
	Now func() time.Time

	mu      sync.Mutex
	buf     []byte
	buckets map[int64]map[string]float64 // minute (unix s / 60) -> series -> sum
	seen    map[string]bool              // series that ever had a metric
}

// NewRates returns an empty Rates.
func NewRates() *Rates { return &Rates{} }

func (r *Rates) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Write implements io.Writer: complete lines are parsed, a partial line is
// kept for the next Write.
func (r *Rates) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, b...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			break
		}
		r.add(r.buf[:i])
		r.buf = r.buf[i+1:]
	}
	if len(r.buf) > 1<<20 { // a runaway line without newline: drop it
		r.buf = nil
	}
	return len(b), nil
}

// emfDoc is the part of an EMF document Rates reads.
type emfDoc struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Metrics []struct {
				Name string `json:"Name"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

// add sums one EMF line (r.mu held).
func (r *Rates) add(line []byte) {
	var d emfDoc
	if json.Unmarshal(line, &d) != nil || len(d.AWS.CloudWatchMetrics) == 0 {
		return
	}
	var values map[string]any
	if json.Unmarshal(line, &values) != nil {
		return
	}
	declared := map[string]bool{}
	for _, cw := range d.AWS.CloudWatchMetrics {
		for _, m := range cw.Metrics {
			declared[m.Name] = true
		}
	}
	ts := time.UnixMilli(d.AWS.Timestamp)
	if d.AWS.Timestamp <= 0 {
		ts = r.now()
	}
	minute := ts.Unix() / 60
	for series, ms := range SeriesMetrics {
		for _, m := range ms {
			v, ok := values[m.Name].(float64)
			if !ok || !declared[m.Name] {
				continue
			}
			if r.buckets == nil {
				r.buckets = map[int64]map[string]float64{}
				r.seen = map[string]bool{}
			}
			b := r.buckets[minute]
			if b == nil {
				b = map[string]float64{}
				r.buckets[minute] = b
			}
			b[series] += v * m.Scale
			r.seen[series] = true
		}
	}
	r.prune(r.now().Unix() / 60)
}

func (r *Rates) prune(current int64) {
	for m := range r.buckets {
		if m <= current-Minutes {
			delete(r.buckets, m)
		}
	}
}

// RateView is the per-minute series of the last Minutes minutes, oldest
// first; Start is the first minute. A usage series never emitted is nil
// (JSON null: "no data").
type RateView struct {
	Start   time.Time            `json:"start"`
	Minutes int                  `json:"minutes"`
	Series  map[string][]float64 `json:"series"`
}

// View returns the series as of now.
func (r *Rates) View() RateView {
	r.mu.Lock()
	defer r.mu.Unlock()
	current := r.now().Unix() / 60
	r.prune(current)
	first := current - Minutes + 1
	v := RateView{Start: time.Unix(first*60, 0).UTC(), Minutes: Minutes, Series: map[string][]float64{}}
	names := make([]string, 0, len(SeriesMetrics))
	for s := range SeriesMetrics {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		if UsageSeries[s] && !r.seen[s] {
			v.Series[s] = nil
			continue
		}
		vals := make([]float64, Minutes)
		for i := range vals {
			vals[i] = r.buckets[first+int64(i)][s]
		}
		v.Series[s] = vals
	}
	return v
}
