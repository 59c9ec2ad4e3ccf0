package metrics

import (
	"io"
	"time"
)

// NewWriterAt returns a Writer on out whose records are timestamped by now
// (tests with a settable clock; NewWriter uses time.Now).
func NewWriterAt(out io.Writer, now func() time.Time) *Writer {
	if now == nil {
		now = time.Now
	}
	return &Writer{out: out, now: now}
}
