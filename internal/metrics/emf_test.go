package metrics

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestRecordShape(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.now = func() time.Time { return time.UnixMilli(1700000000000) }
	err := w.Record("Function", "reconciler", "State", "queued").
		Set("LiveTasks", 3, Count).Add("Resent", 1, Count).Add("Resent", 1, Count).
		Property("run_id", "r1").Flush()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function  string
		State     string
		LiveTasks float64
		Resent    float64
		RunID     string `json:"run_id"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %q", buf.String())
	}
	cw := doc.AWS.CloudWatchMetrics
	if doc.AWS.Timestamp != 1700000000000 || len(cw) != 1 || cw[0].Namespace != Namespace ||
		len(cw[0].Dimensions) != 1 || len(cw[0].Dimensions[0]) != 2 || cw[0].Dimensions[0][0] != "Function" ||
		len(cw[0].Metrics) != 2 || cw[0].Metrics[0].Name != "LiveTasks" || cw[0].Metrics[0].Unit != Count {
		t.Fatalf("envelope = %+v", doc.AWS)
	}
	if doc.Function != "reconciler" || doc.State != "queued" || doc.LiveTasks != 3 || doc.Resent != 2 || doc.RunID != "r1" {
		t.Fatalf("members = %+v", doc)
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Fatal("want exactly one line")
	}
}

func TestEmptyRecordWritesNothing(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := NewWriter(&buf).Record("A", "b").Flush(); err != nil || buf.Len() != 0 {
		t.Fatalf("wrote %q, %v", buf.String(), err)
	}
}

// An optional writer is a nil *Writer: its callers record without a check.
func TestNilWriterRecordsNothing(t *testing.T) {
	t.Parallel()
	var w *Writer
	if err := w.Record("A", "b").Add("M", 1, Count).Set("N", 2, Count).Property("p", "v").Flush(); err != nil {
		t.Fatalf("nil writer's Flush: %v", err)
	}
}
