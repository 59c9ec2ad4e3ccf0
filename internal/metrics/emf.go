package metrics

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// Units used by taskledger.
const (
	Count        = "Count"
	Milliseconds = "Milliseconds"
	Seconds      = "Seconds"
	Bytes        = "Bytes"
	None         = "None"
)

// Namespace is the CloudWatch namespace of every taskledger metric.
const Namespace = "taskledger"

// Writer serialises records to an io.Writer, one line each. Safe for
// concurrent use. A nil *Writer's records write nothing, so an optional
// writer needs no check at each record.
type Writer struct {
	mu  sync.Mutex
	out io.Writer
	now func() time.Time
}

// NewWriter returns a Writer on out (os.Stdout in Lambda).
func NewWriter(out io.Writer) *Writer { return &Writer{out: out, now: time.Now} }

// Record is a set of metrics with shared dimensions.
type Record struct {
	w          *Writer
	dims       map[string]string
	dimOrder   []string
	values     map[string]float64
	units      map[string]string
	metricList []string
	props      map[string]any
}

// Record starts a record with the given dimensions (name, value pairs).
func (w *Writer) Record(dims ...string) *Record {
	r := &Record{w: w, dims: map[string]string{}, values: map[string]float64{}, units: map[string]string{}, props: map[string]any{}}
	for i := 0; i+1 < len(dims); i += 2 {
		if _, ok := r.dims[dims[i]]; !ok {
			r.dimOrder = append(r.dimOrder, dims[i])
		}
		r.dims[dims[i]] = dims[i+1]
	}
	return r
}

// Add adds v to the named metric (creating it with unit).
func (r *Record) Add(name string, v float64, unit string) *Record {
	if _, ok := r.values[name]; !ok {
		r.metricList = append(r.metricList, name)
		r.units[name] = unit
	}
	r.values[name] += v
	return r
}

// Set sets the named metric to v.
func (r *Record) Set(name string, v float64, unit string) *Record {
	if _, ok := r.values[name]; !ok {
		r.metricList = append(r.metricList, name)
		r.units[name] = unit
	}
	r.values[name] = v
	return r
}

// Property adds a searchable, non-metric member (ids, not text).
func (r *Record) Property(k string, v any) *Record {
	r.props[k] = v
	return r
}

// Flush writes the record; a record with no metrics, or of a nil Writer,
// writes nothing.
func (r *Record) Flush() error {
	if r.w == nil || len(r.metricList) == 0 {
		return nil
	}
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	type directive struct {
		Namespace  string     `json:"Namespace"`
		Dimensions [][]string `json:"Dimensions"`
		Metrics    []metric   `json:"Metrics"`
	}
	d := directive{Namespace: Namespace, Dimensions: [][]string{append([]string{}, r.dimOrder...)}}
	names := append([]string{}, r.metricList...)
	sort.Strings(names)
	for _, n := range names {
		d.Metrics = append(d.Metrics, metric{Name: n, Unit: r.units[n]})
	}
	doc := map[string]any{}
	for k, v := range r.props {
		doc[k] = v
	}
	for k, v := range r.dims {
		doc[k] = v
	}
	for k, v := range r.values {
		doc[k] = v
	}
	doc["_aws"] = map[string]any{
		"Timestamp":         r.w.now().UnixMilli(),
		"CloudWatchMetrics": []directive{d},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	_, err = r.w.out.Write(append(b, '\n'))
	return err
}
