package opsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/overview"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// MaxBody caps POST bodies (bytes).
const MaxBody = 16 << 10

// Handler serves the operator API. Ledger is required; Dispatch is needed
// for retry (without it a retried task waits for the reconciler's relay).
type Handler struct {
	Ledger   *ledger.Ledger
	Dispatch *dispatch.Sender
	// Budgets, when set, guards a retry of a budgeted task (Apply).
	Budgets *spend.Accountant
	Log     *slog.Logger
	// Overview serves GET /overview (optional: without it, 404).
	Overview *overview.Reader
	// Hosts are the Host header values served ("host:port", compared
	// without case): the addresses the server is bound to (LoopbackHosts).
	// Empty: localhost, 127.0.0.1 and [::1] on any port. A request naming
	// any other host — a DNS-rebinding page whose own domain now resolves to
	// 127.0.0.1 — is answered 421 and nothing runs.
	Hosts []string

	once sync.Once
	mux  *http.ServeMux
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.admitHost(w, r) {
		return
	}
	h.once.Do(func() {
		m := http.NewServeMux()
		m.HandleFunc("GET /reviews", h.list)
		m.HandleFunc("GET /overview", h.overview)
		m.HandleFunc("GET /reviews/{id}", h.show)
		m.HandleFunc("POST /reviews/{id}/retry", h.retry)
		m.HandleFunc("POST /reviews/{id}/resolve", h.resolve)
		m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			writeProblem(w, http.StatusNotFound, "not-found", "Not found", "no such route: "+r.Method+" "+r.URL.Path)
		})
		h.mux = m
	})
	h.mux.ServeHTTP(w, r)
}

// Guard serves next only for requests whose Host is one of h.Hosts (the
// same rule as the operator API's own), answering any other 421: the local
// stack wraps its whole server with it, so a DNS-rebinding page can neither
// submit nor read tasks through a browser on this machine.
func (h *Handler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.admitHost(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// admitHost answers 421 and reports false for a foreign Host.
func (h *Handler) admitHost(w http.ResponseWriter, r *http.Request) bool {
	if h.hostAllowed(r.Host) {
		return true
	}
	h.log().WarnContext(r.Context(), "opsapi: request for a foreign Host refused (DNS rebinding?)", "host_bytes", len(r.Host), "method", r.Method)
	writeProblem(w, http.StatusMisdirectedRequest, "host-not-allowed", "Host not allowed",
		"This local server answers only requests addressed to its own loopback address (localhost, 127.0.0.1 or [::1] and its port). Nothing was done.")
	return false
}

// LoopbackHosts are the Host values a server listening on addr answers to:
// localhost, 127.0.0.1 and [::1] with addr's port, and addr itself.
func LoopbackHosts(addr net.Addr) []string {
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return []string{addr.String()}
	}
	return []string{addr.String(), net.JoinHostPort("localhost", port), net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port)}
}

func (h *Handler) hostAllowed(host string) bool {
	if len(h.Hosts) > 0 {
		for _, a := range h.Hosts {
			if strings.EqualFold(a, host) {
				return true
			}
		}
		return false
	}
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	switch strings.ToLower(name) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return logging.Discard()
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	limit := int32(50)
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			writeProblem(w, http.StatusBadRequest, "invalid-request", "Invalid limit", "limit must be an integer from 1 to 100")
			return
		}
		limit = int32(n)
	}
	items, next, err := tasklist.ListOpenReviews(r.Context(), h.Ledger, limit, r.URL.Query().Get("cursor"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if items == nil {
		items = []ledger.Review{}
	}
	writeJSON(w, http.StatusOK, ReviewPage{Items: items, NextCursor: next})
}

func (h *Handler) show(w http.ResponseWriter, r *http.Request) {
	id, ok := reviewID(w, r)
	if !ok {
		return
	}
	d, err := Show(r.Context(), h.Ledger, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// Show reads a review item and, unless it is a poison message, its task.
func Show(ctx context.Context, l *ledger.Ledger, id string) (ReviewDetail, error) {
	rv, err := l.GetReview(ctx, id)
	if err != nil {
		return ReviewDetail{}, err
	}
	d := ReviewDetail{Review: rv}
	if rv.Reason != ledger.ReviewPoisonMessage {
		t, err := l.Get(ctx, id)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return ReviewDetail{}, err
		}
		d.Task = ViewTask(t)
	}
	return d, nil
}

// ParkCount in a body is the park the action was decided on (the review
// item's park_count as read; absent or 0: the review open now).
type retryBody struct {
	By        string `json:"by"`
	Note      string `json:"note"`
	ParkCount int    `json:"park_count"`
}

type resolveBody struct {
	Outcome   string `json:"outcome"`
	Note      string `json:"note"`
	By        string `json:"by"`
	ParkCount int    `json:"park_count"`
}

func (h *Handler) retry(w http.ResponseWriter, r *http.Request) {
	id, ok := reviewID(w, r)
	if !ok {
		return
	}
	var b retryBody
	if !decode(w, r, &b) {
		return
	}
	h.act(w, r, id, ledger.OperatorAction{Resolution: ledger.ResolutionRetry, Note: b.Note, By: b.By, ParkCount: b.ParkCount})
}

func (h *Handler) resolve(w http.ResponseWriter, r *http.Request) {
	id, ok := reviewID(w, r)
	if !ok {
		return
	}
	var b resolveBody
	if !decode(w, r, &b) {
		return
	}
	if b.Outcome != ledger.ResolutionCompleted && b.Outcome != ledger.ResolutionFailed {
		writeProblem(w, http.StatusBadRequest, "invalid-action", "Invalid outcome", `outcome must be "completed" or "failed" (use /retry to re-queue)`)
		return
	}
	h.act(w, r, id, ledger.OperatorAction{Resolution: b.Outcome, Note: b.Note, By: b.By, ParkCount: b.ParkCount})
}

func (h *Handler) act(w http.ResponseWriter, r *http.Request, id string, a ledger.OperatorAction) {
	res, err := Apply(r.Context(), h.Ledger, h.Dispatch, h.Budgets, id, a)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log().InfoContext(r.Context(), "opsapi: operator action", "review_id", id, "resolution", a.Resolution,
		"by", a.By, "replayed", res.Replayed, "dispatched", res.Dispatched != nil && *res.Dispatched)
	if res.SpendErr != nil {
		h.log().WarnContext(r.Context(), "opsapi: settling the parked run's reservations failed; they stay counted", "review_id", id, "error", res.SpendErr.Error())
	}
	writeJSON(w, http.StatusOK, res)
}

// Apply performs an operator action (ledger.Act) and, after a retry that
// changed something, sends the task's message. A failed send is not an
// error: the task is queued with a dispatch deadline and the reconciler
// relays it (Dispatched=false says so). The CLI and the HTTP API share it.
//
// Before a retry of a parked task with a budget, budgets (nil: no check)
// keeps the task's chain and own budget records alive for the run that
// follows (spend.Accountant.Keep): a task waits in needs_review for as long
// as it takes, its records are kept only so long after the last
// reservation, and a retry that found them gone would start the budget
// from nothing spent. When they may have held spend and are gone, the
// retry is refused with a *spend.RecordExpiredError and nothing changes.
//
// After any action on a parked task, budgets also settles what the parked
// run's attempts still hold on its budgets and its caller's daily quota
// (spend.Accountant.SettleAbandoned, in full: a crashed attempt's
// reservation, when the park did not settle it): the run never continues
// (a retry starts a new one, whose reservations have other ids). Best
// effort: a failure leaves them counted (the safe side), does not undo the
// action, and is returned as ActionResult.SpendErr.
func Apply(ctx context.Context, l *ledger.Ledger, d *dispatch.Sender, budgets *spend.Accountant, id string, a ledger.OperatorAction) (ActionResult, error) {
	var parked *ledger.Task
	if budgets != nil && ledger.ValidTaskID(id) {
		t, err := l.Get(ctx, id)
		switch {
		case err == nil && t.State == ledger.StateNeedsReview:
			parked = t
			if a.Resolution != ledger.ResolutionRetry {
				break
			}
			if err := budgets.Keep(ctx, t, spend.ChainKeyOf(t), spend.TaskKeyOf(t)); err != nil {
				return ActionResult{}, err
			}
		case err != nil && !errors.Is(err, ledger.ErrNotFound) && a.Resolution == ledger.ResolutionRetry:
			return ActionResult{}, err
		}
	}
	rv, t, replayed, err := l.Act(ctx, id, a)
	if err != nil {
		return ActionResult{}, err
	}
	res := ActionResult{Review: rv, Task: ViewTask(t), Replayed: replayed}
	if parked != nil && parked.ParkCount > 0 && (a.ParkCount == 0 || a.ParkCount == parked.ParkCount) {
		// The parked run reserved under the park count it had then. A
		// replay of an action on an earlier park leaves the park open
		// now, and its run, undecided.
		run := *parked
		run.ParkCount--
		if _, serr := budgets.SettleAbandoned(ctx, &run, 0); serr != nil {
			res.SpendErr = serr
		}
	}
	if a.Resolution == ledger.ResolutionRetry && !replayed {
		sent := false
		if d != nil && t != nil {
			sent = d.Send(ctx, t.TaskID, t.CorrelationID, 0) == nil
		}
		res.Dispatched = &sent
	}
	return res, nil
}

// reviewID validates the {id} path value: a task id or a poison item id.
func reviewID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if ledger.ValidTaskID(id) || (strings.HasPrefix(id, "msg_") && len(id) <= 200) {
		return id, true
	}
	writeProblem(w, http.StatusNotFound, "not-found", "Review item not found", "no review item has the id "+strconv.Quote(clip(id, 80)))
	return "", false
}

// decode reads a JSON POST body strictly into v.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		writeProblem(w, http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", "send the body as application/json")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, http.StatusRequestEntityTooLarge, "body-too-large", "Body too large", fmt.Sprintf("the body is over %d bytes", MaxBody))
			return false
		}
		writeProblem(w, http.StatusBadRequest, "malformed-json", "Unreadable body", err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		// Anything after the object, a stray ] or } included (which
		// dec.More does not report), makes the body more than one object.
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			err = errors.New("trailing data after the object")
		}
	}
	if err != nil {
		detail := "the body must be one JSON object: " + err.Error()
		writeProblem(w, http.StatusBadRequest, "malformed-json", "Malformed JSON", detail)
		return false
	}
	return true
}

// fail maps a ledger error to a problem response.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ce *ledger.ConflictError
	var te *ledger.ThrottledError
	var re *spend.RecordExpiredError
	switch {
	case errors.Is(err, ledger.ErrInvalidAction):
		writeProblem(w, http.StatusBadRequest, "invalid-action", "Invalid action", err.Error())
	case errors.Is(err, tasklist.ErrBadCursor):
		writeProblem(w, http.StatusBadRequest, "bad-cursor", "Invalid cursor", "use the next_cursor of a previous page")
	case errors.Is(err, ledger.ErrNotFound):
		writeProblem(w, http.StatusNotFound, "not-found", "Review item not found", "no review item or task has the id "+strconv.Quote(r.PathValue("id")))
	case errors.As(err, &ce):
		writeProblem(w, http.StatusConflict, "state-conflict", "Conflicting action", ce.Error())
	case errors.As(err, &re):
		writeProblem(w, http.StatusConflict, "budget-record-expired", "Budget record expired",
			fmt.Sprintf("Not retried, nothing changed: task %s was created %s and its budget record %s is gone (it is kept %s after the last reservation), so what it spent is not known and a retry would start the budget from nothing spent. Resolve the review instead, or submit the work as a new task.",
				re.TaskID, re.Created.Format(time.RFC3339), re.Key, re.Retention))
	case errors.As(err, &te):
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(te.RetryAfter/time.Second))))
		writeProblem(w, http.StatusServiceUnavailable, "throttled", "Throttled", "DynamoDB throttled the request; nothing was changed; try again")
	default:
		h.log().ErrorContext(r.Context(), "opsapi: request failed", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		writeProblem(w, http.StatusInternalServerError, "internal", "Internal error", "the request failed; see the logs")
	}
}

// Problem is an RFC 9457 problem document.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// ProblemType returns the stable type URI of a problem slug.
func ProblemType(slug string) string { return ProblemBase + slug }

// ProblemBase prefixes every problem type; the same base as the public
// API's (internal/api), so one document can describe both.
const ProblemBase = "https://taskledger.dev/problems/"

func writeProblem(w http.ResponseWriter, status int, slug, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: ProblemType(slug), Title: title, Status: status, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
