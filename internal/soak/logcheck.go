package soak

import (
	"context"
	"log/slog"
	"strings"
)

// discardedLog is the worker's message for a completion it believes was
// rejected; retryFencedLog for a schedule-retry it believes was rejected
// (the worker then acknowledges the record: no message is left to carry
// the retry).
const (
	discardedLog   = "result discarded"
	retryFencedLog = "retry rejected: the assignment was fenced"
	// notAdmittedLog: the worker put a task back to wait for admission.
	notAdmittedLog = "not admitted: the model's window is full"
	// requeuedLog: the reconciler re-queued a task whose lease expired
	// (with or without a call started under it).
	requeuedLog = "reconciler: expired lease re-queued"
)

// watchLog wraps the handlers' log handler and reports every record whose
// message is watched, with its task_id, version, current_version and
// attempts attributes (from the record or the logger's With).
type watchLog struct {
	inner slog.Handler
	attrs []slog.Attr
	seen  func(msg, taskID string, version, current, attempts int64)
}

func (h *watchLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.inner.Enabled(ctx, l) // notAdmittedLog is Info
}

func (h *watchLog) Handle(ctx context.Context, r slog.Record) error {
	if msg := watched(r.Message); msg != "" {
		var id string
		var version, current, attempts int64
		look := func(a slog.Attr) bool {
			switch a.Key {
			case "task_id":
				id = a.Value.String()
			case "version":
				if a.Value.Kind() == slog.KindInt64 {
					version = a.Value.Int64()
				}
			case "current_version":
				if a.Value.Kind() == slog.KindInt64 {
					current = a.Value.Int64()
				}
			case "attempts":
				if a.Value.Kind() == slog.KindInt64 {
					attempts = a.Value.Int64()
				}
			}
			return true
		}
		for _, a := range h.attrs {
			look(a)
		}
		r.Attrs(look)
		h.seen(msg, id, version, current, attempts)
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *watchLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &watchLog{inner: h.inner.WithAttrs(as), attrs: append(append([]slog.Attr(nil), h.attrs...), as...), seen: h.seen}
}

func (h *watchLog) WithGroup(name string) slog.Handler {
	return &watchLog{inner: h.inner.WithGroup(name), attrs: h.attrs, seen: h.seen}
}

// watched returns which watched message m is, or "".
func watched(m string) string {
	for _, w := range []string{discardedLog, retryFencedLog, notAdmittedLog, requeuedLog} {
		if strings.Contains(m, w) {
			return w
		}
	}
	return ""
}
