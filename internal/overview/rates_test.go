package overview_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/overview"
	"github.com/taskledger/taskledger/internal/testenv"
)

func TestRatesSumsPerMinute(t *testing.T) {
	clock := testenv.NewClock(time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC))
	r := overview.NewRates()
	r.Now = clock.Now
	w := metrics.NewWriterAt(r, clock.Now)

	// Two worker batches this minute, one the minute before.
	clock.Advance(-time.Minute)
	must(t, w.Record("Service", "worker").Add("Completed", 1, metrics.Count).Add("Failed", 0, metrics.Count).Flush())
	clock.Advance(time.Minute)
	must(t, w.Record("Service", "worker").Add("Completed", 2, metrics.Count).Add("Failed", 1, metrics.Count).Add("Parked", 1, metrics.Count).Flush())
	must(t, w.Record("Service", "worker").Add("Completed", 3, metrics.Count).Flush())
	// The reconciler's completions from readback count as completions.
	must(t, w.Record("Function", "reconciler").Set("CompletedFromReadback", 4, metrics.Count).Set("Parked", 2, metrics.Count).Flush())
	// Not EMF, or a metric value not declared in _aws: ignored.
	fmt.Fprintf(r, "not json\n{\"Completed\": 100}\n")

	v := r.View()
	if v.Minutes != overview.Minutes || len(v.Series["completed"]) != overview.Minutes {
		t.Fatalf("minutes = %d, series length %d; want %d", v.Minutes, len(v.Series["completed"]), overview.Minutes)
	}
	if want := time.Date(2026, 12, 1, 9, 46, 0, 0, time.UTC); !v.Start.Equal(want) {
		t.Errorf("start = %s, want %s", v.Start, want)
	}
	last := overview.Minutes - 1
	checkSeries(t, v, "completed", last, 2+3+4)
	checkSeries(t, v, "completed", last-1, 1)
	checkSeries(t, v, "failed", last, 1)
	checkSeries(t, v, "parked", last, 1+2)
	// Usage never emitted: no data (nil), not zeros. Events never emitted
	// did not happen: zeros.
	for _, s := range []string{"tokens", "cost_usd"} {
		if v.Series[s] != nil {
			t.Errorf("series %s = %v, want nil (no data)", s, v.Series[s])
		}
	}
	checkSeries(t, v, "retried", last, 0)
	checkSeries(t, v, "provider_calls", last, 0)
}

func TestRatesTokensAndCostOnceEmitted(t *testing.T) {
	clock := testenv.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	r := overview.NewRates()
	r.Now = clock.Now
	w := metrics.NewWriterAt(r, clock.Now)
	must(t, w.Record("Service", "worker").Add("InputTokens", 120, metrics.Count).Add("OutputTokens", 30, metrics.Count).
		Add("CostMicros", 2500, metrics.None).Flush())
	must(t, w.Record("Service", "worker").Add("CostUSD", 0.01, metrics.None).Flush())
	v := r.View()
	last := overview.Minutes - 1
	checkSeries(t, v, "tokens", last, 150)
	checkSeries(t, v, "cost_usd", last, 0.0125)
}

func TestRatesForgetOldMinutesAndSplitLines(t *testing.T) {
	clock := testenv.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	r := overview.NewRates()
	r.Now = clock.Now
	var buf testenv.Buffer
	w := metrics.NewWriterAt(&buf, clock.Now)
	must(t, w.Record("Service", "worker").Add("Completed", 7, metrics.Count).Flush())
	line := []byte(buf.String())
	// A line written in two pieces counts once, when complete.
	if _, err := r.Write(line[:10]); err != nil {
		t.Fatal(err)
	}
	if got := r.View().Series["completed"][overview.Minutes-1]; got != 0 {
		t.Fatalf("half a line counted: %v", got)
	}
	if _, err := r.Write(line[10:]); err != nil {
		t.Fatal(err)
	}
	checkSeries(t, r.View(), "completed", overview.Minutes-1, 7)

	clock.Advance(overview.Minutes * time.Minute)
	v := r.View()
	for i, x := range v.Series["completed"] {
		if x != 0 {
			t.Errorf("minute %d = %v after the window moved past it, want 0", i, x)
		}
	}
}

func checkSeries(t *testing.T, v overview.RateView, name string, i int, want float64) {
	t.Helper()
	s := v.Series[name]
	if s == nil {
		t.Fatalf("series %s: no data, want %v at %d", name, want, i)
	}
	if d := s[i] - want; d > 1e-9 || d < -1e-9 {
		t.Errorf("series %s[%d] = %v, want %v (series %v)", name, i, s[i], want, s)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
