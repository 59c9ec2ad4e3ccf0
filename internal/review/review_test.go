package review_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

const secret = "PROMPT-TEXT-MUST-NOT-APPEAR"

func task(state ledger.State) *ledger.Task {
	created := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	return &ledger.Task{
		TaskID: "t_abcdefghijklmnopqrstuvwxyz", State: state, Input: `{"prompt":"` + secret + `"}`,
		Result: `{"text":"` + secret + `"}`, Attempts: 5, MaxAttempts: 5,
		CreatedMs: created.UnixMilli(), MaxAgeMs: time.Hour.Milliseconds(), DeadlineMs: created.Add(time.Hour).UnixMilli(),
		UpdatedMs: created.Add(30 * time.Minute).UnixMilli(), LeaseOwner: "req-1/rec-2",
		LeaseUntil: created.Add(20 * time.Minute).UnixMilli(), ErrorClass: "transient", ErrorMessage: "503 from provider",
	}
}

func all(r ledger.Review) string {
	return strings.Join(append(append(append([]string{r.Summary}, r.Known...), r.Uncertain...), r.SafeActions...), "\n")
}

func check(t *testing.T, r ledger.Review, reason string, wants ...string) {
	t.Helper()
	if r.Reason != reason {
		t.Errorf("reason = %q, want %q", r.Reason, reason)
	}
	if len(r.Known) == 0 || len(r.Uncertain) == 0 || len(r.SafeActions) == 0 {
		t.Errorf("empty list: known=%d uncertain=%d safe=%d", len(r.Known), len(r.Uncertain), len(r.SafeActions))
	}
	if !strings.HasSuffix(r.Summary, ".") || strings.Contains(strings.TrimSuffix(r.Summary, "."), ". ") {
		t.Errorf("summary is not one sentence: %q", r.Summary)
	}
	text := all(r)
	if strings.Contains(text, secret) {
		t.Errorf("task text leaked into the review item:\n%s", text)
	}
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("missing %q in:\n%s", w, text)
		}
	}
}

func TestBudgetExhausted(t *testing.T) {
	t.Parallel()
	r := review.BudgetExhausted(task(ledger.StateRetryWait), review.BudgetAttempts)
	check(t, r, ledger.ReviewBudgetExhausted, "used 5 of 5 attempts", "no attempt was in flight", "review retry t_abcdefghijklmnopqrstuvwxyz", "--outcome failed", "last error class: transient (503 from provider)")
	if strings.Contains(all(r), "--outcome completed") {
		t.Error("a task with no attempt in flight must not suggest resolving as completed")
	}

	r = review.BudgetExhausted(task(ledger.StateRunning), review.BudgetAge)
	check(t, r, ledger.ReviewBudgetExhausted, "1h age budget", "2025-03-01T11:00:00Z", "may have reached the provider", `leased to "req-1/rec-2" until 2025-03-01T10:20:00Z`, "--outcome completed", "possible duplicate")
}

func TestUnknownOutcome(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC)
	r := review.UnknownOutcome(task(ledger.StateUnknown), "simulated", at, "the provider offers no readback")
	check(t, r, ledger.ReviewUnknownOutcome,
		"the provider may have produced a result at 2025-03-01T10:30:00Z; no readback is possible; safe: resolve as completed with evidence, or retry accepting a possible duplicate generation",
		"simulated with operation id t_abcdefghijklmnopqrstuvwxyz", "no readback: the provider offers no readback")
}

// TestUnknownOutcomeOfAnExpiredLease: a lease the reconciler expired says
// nothing about whether the worker's call had started; a worker's own
// MarkUnknown followed a call that was sent.
func TestUnknownOutcomeOfAnExpiredLease(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC)
	x := task(ledger.StateUnknown)
	x.ErrorClass, x.ErrorMessage = "unknown_outcome", ledger.LeaseExpiredMessage
	r := review.UnknownOutcome(x, "simulated", at, "the provider offers no readback")
	check(t, r, ledger.ReviewUnknownOutcome, "attempt 5 of 5 may have been sent to simulated", "whether its call had started is not recorded")
	if strings.Contains(all(r), "was sent") {
		t.Errorf("an expired lease is worded as a known send:\n%s", all(r))
	}
	y := task(ledger.StateUnknown)
	y.ErrorClass, y.ErrorMessage = "unknown_outcome", "timeout after the request was sent"
	check(t, review.UnknownOutcome(y, "simulated", at, "no readback"), ledger.ReviewUnknownOutcome, "attempt 5 of 5 was sent to simulated")
}

// TestResultNotSavedAfterRepeats: a worker whose saves kept failing (not
// refused as invalid) is not told DynamoDB found the write invalid.
func TestResultNotSavedAfterRepeats(t *testing.T) {
	t.Parallel()
	r := review.ResultNotSaved(task(ledger.StateRunning), review.Result{Provider: "sim", ProviderRef: "ref-1", ResultBytes: 42},
		errors.New("ledger: UpdateItem complete: ThrottlingException"))
	check(t, r, ledger.ReviewResultNotSaved, "saving it kept failing", "ref-1", "ThrottlingException", "--outcome completed")
	if strings.Contains(r.Summary, "invalid") {
		t.Errorf("summary calls a throttled save invalid: %q", r.Summary)
	}
}

func TestProviderConfig(t *testing.T) {
	t.Parallel()
	r := review.ProviderConfig(task(ledger.StateRunning), "openai", review.Failure{Class: "permanent_config", HTTPStatus: 401, Message: "401 invalid api key"})
	check(t, r, ledger.ReviewProviderConfig, "provider error: 401 invalid api key", "fix the provider credentials or configuration",
		`refused by provider "openai" (HTTP 401)`, "HTTP 401 (permanent_config)", "no result was produced")
	if r.ErrorClass != "permanent_config" || r.ErrorMessage != "401 invalid api key" {
		t.Errorf("error fields = %q %q", r.ErrorClass, r.ErrorMessage)
	}
}

func TestStaleLease(t *testing.T) {
	t.Parallel()
	check(t, review.StaleLease(task(ledger.StateRunning)), ledger.ReviewStaleLease, "stopped renewing its lease at 2025-03-01T10:20:00Z", "does not deduplicate")
}

func TestPoison(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2000)
	r := review.Poison("m-1", "abc123", 17, long)
	check(t, r, ledger.ReviewPoisonMessage, "17 bytes, SHA-256 abc123", "review resolve msg_m-1 --outcome failed", "no task was created")
	if r.MessageID != "m-1" || r.BodySHA256 != "abc123" || r.BodyBytes != 17 {
		t.Errorf("poison fields = %+v", r)
	}
	if len(r.ErrorMessage) > review.MaxDetail+4 {
		t.Errorf("error message not clipped: %d bytes", len(r.ErrorMessage))
	}
}

// awsLikeError carries an HTTP status the way the AWS SDK's errors do.
type awsLikeError struct{}

func (awsLikeError) Error() string       { return "AccessDeniedException: not authorized" }
func (awsLikeError) HTTPStatusCode() int { return 403 }

func TestFailureOf(t *testing.T) {
	t.Parallel()
	perr := retrypolicy.Misconfigured(&retrypolicy.StatusError{StatusCode: 401})
	f := review.FailureOf(retrypolicy.Classify(perr), perr, "m")
	if f.Class != "permanent_config" || f.HTTPStatus != 401 || f.Message != "m" {
		t.Errorf("FailureOf(steered 401) = %+v", f)
	}
	r := review.ProviderConfig(task(ledger.StateRunning), "", f)
	check(t, r, ledger.ReviewProviderConfig, "refused by the provider (HTTP 401)", "with HTTP 401 (permanent_config)")
	if strings.Contains(all(r), "steered") {
		t.Errorf("steering noise in the review item:\n%s", all(r))
	}

	f = review.FailureOf(retrypolicy.Classification{Class: retrypolicy.PermanentConfig, Reason: "aws_AccessDeniedException"}, awsLikeError{}, "m")
	check(t, review.ProviderConfig(task(ledger.StateRunning), "bedrock", f), ledger.ReviewProviderConfig,
		`provider "bedrock" (aws_AccessDeniedException, HTTP 403)`)

	if f := review.FailureOf(retrypolicy.Classification{}, nil, ""); f.Class != "" || f.HTTPStatus != 0 {
		t.Errorf("FailureOf(no failure) = %+v", f)
	}
}

func TestBudgetExhaustedAfter(t *testing.T) {
	t.Parallel()
	// The attempt that just ended failed: nothing is in flight, even though
	// the task is still running under the worker's lease.
	tk := task(ledger.StateRunning)
	tk.ErrorClass, tk.ErrorMessage = "", ""
	f := review.Failure{Class: "transient", Reason: "http_503", HTTPStatus: 503, Message: "http_503: upstream unavailable"}
	r := review.BudgetExhaustedAfter(tk, review.BudgetAttempts, f, time.Time{})
	check(t, r, ledger.ReviewBudgetExhausted, "used 5 of 5 attempts without a result, the last attempt failing with HTTP 503 (transient)",
		"attempt 5 ended with HTTP 503 (transient) and returned no result", "budget exhausted: max_attempts", "whether the cause of the failures")
	if r.ErrorClass != "transient" || r.ErrorMessage != f.Message {
		t.Errorf("error fields = %q %q", r.ErrorClass, r.ErrorMessage)
	}
	if len(r.SafeActions) != 2 || strings.Contains(all(r), "--outcome completed") || strings.Contains(all(r), "leased to") {
		t.Errorf("an attempt that ended is not in flight:\n%s", all(r))
	}

	// The next attempt would start after the age budget's end.
	next := time.Date(2025, 3, 1, 11, 0, 30, 0, time.UTC)
	tk.Attempts = 2
	r = review.BudgetExhaustedAfter(tk, review.BudgetAge, review.Failure{Class: "transient", Reason: "http_429"}, next)
	check(t, r, ledger.ReviewBudgetExhausted, "could not start its next attempt before its 1h age budget ends at 2025-03-01T11:00:00Z, the last attempt failing with http_429 (transient)",
		"the next attempt could start at 2025-03-01T11:00:30Z at the earliest", "budget exhausted: max_age")

	// An earlier attempt's outcome was unknown: even with nothing in flight,
	// a result may exist at the provider.
	tk = task(ledger.StateRetryWait)
	tk.ErrorClass = "unknown_outcome"
	r = review.BudgetExhausted(tk, review.BudgetAge)
	check(t, r, ledger.ReviewBudgetExhausted, "(last recorded error: unknown_outcome)", "an earlier attempt whose outcome was unknown may have reached the provider",
		"look up operation id t_abcdefghijklmnopqrstuvwxyz at the provider", "--outcome completed")
	if strings.Contains(all(r), "nothing was generated") {
		t.Errorf("an earlier unknown outcome must not be reported as nothing generated:\n%s", all(r))
	}
}

func TestPoisonFromTaskQueue(t *testing.T) {
	t.Parallel()
	sent := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	r := review.PoisonFrom("m-2", "def456", 9, "dispatch: not a task reference: trailing data after the JSON object",
		review.PoisonOptions{Queue: review.TaskQueue, ReceiveCount: 3, SentAt: sent, CorrelationID: strings.Repeat("c", 500)})
	check(t, r, ledger.ReviewPoisonMessage, "on the task queue", "acknowledged rather than retried", "deleted it from the task queue",
		"rejected because: trailing data after the JSON object", "receive count when recorded: 3", "first sent at 2025-03-01T09:00:00Z",
		"review resolve msg_m-2 --outcome failed", "POST /tasks")
	if len(r.CorrelationID) > 128+len("…") || !strings.HasPrefix(r.CorrelationID, "ccc") {
		t.Errorf("correlation id = %q", r.CorrelationID)
	}
	if d := review.Poison("m-3", "x", 1, "y"); !strings.Contains(d.Summary, "dead-letter queue") || d.CorrelationID != "" || strings.Contains(all(d), "receive count") {
		t.Errorf("dead-letter poison item = %+v", d)
	}
}

func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	tk := task(ledger.StateRunning)
	tk.Attempts = 2
	r := review.ResultTooLarge(tk, review.Result{Provider: "bedrock", ProviderRef: "req-77", ResultBytes: 500000, ItemBytes: 500900, Limit: 409600})
	check(t, r, ledger.ReviewResultTooLarge, "the call succeeded", "provider_ref req-77", "500000 bytes", "500900 bytes", "409600 bytes",
		"was not saved", "S3", "DESIGN §12", "review retry t_abcdefghijklmnopqrstuvwxyz")
	if strings.Contains(all(r), "may have") {
		t.Errorf("a succeeded call is not an unknown outcome:\n%s", all(r))
	}
	if r.ProviderRef != "req-77" || r.ErrorClass != "result_too_large" {
		t.Errorf("provider_ref %q error_class %q", r.ProviderRef, r.ErrorClass)
	}
	rb := review.ResultTooLarge(tk, review.Result{Provider: "sim", ResultBytes: 1 << 20, Limit: 409600, FromReadback: true})
	check(t, rb, ledger.ReviewResultTooLarge, "a readback from sim found the result", "no provider reference")
}

func TestResultNotSaved(t *testing.T) {
	t.Parallel()
	r := review.ResultNotSaved(task(ledger.StateUnknown), review.Result{Provider: "sim", ProviderRef: "ref-1", ResultBytes: 42, FromReadback: true},
		errors.New("ledger: UpdateItem complete: AccessDeniedException"))
	check(t, r, ledger.ReviewResultNotSaved, "readback from sim found the result", "42 bytes", "AccessDeniedException", "was not saved", "--outcome completed")
}

func TestLapsedResult(t *testing.T) {
	t.Parallel()
	tk := task(ledger.StateRunning)
	tk.Attempts, tk.AssignmentVersion = 2, 3
	at := time.Date(2025, 3, 1, 10, 40, 0, 0, time.UTC)
	r := review.LapsedResult(tk, review.Result{Provider: "bedrock", ProviderRef: "req-9", ResultBytes: 1234}, at, "req-1/rec-2")
	if r.By != "worker req-1/rec-2" {
		t.Errorf("by = %q", r.By)
	}
	for _, w := range []string{"attempt 2 of 5 called bedrock", "provider_ref req-9", "1234 bytes", "2025-03-01T10:40:00Z",
		"after the task was parked unknown_outcome", "assignment version 3", "no retry is needed"} {
		if !strings.Contains(r.Note, w) {
			t.Errorf("missing %q in %q", w, r.Note)
		}
	}
	if strings.Contains(r.Note, secret) || len(r.Note) > ledger.MaxNote {
		t.Errorf("note leaks task text or is too long (%d bytes): %q", len(r.Note), r.Note)
	}
}

// TestBudgetExhaustedNoCall: an expired last lease without a call-start
// mark is worded as no call started, never as a possible side effect.
func TestBudgetExhaustedNoCall(t *testing.T) {
	t.Parallel()
	x := task(ledger.StateRunning)
	x.AssignmentVersion = 5
	r := review.BudgetExhaustedNoCall(x, review.BudgetAttempts)
	check(t, r, ledger.ReviewBudgetExhausted, "used 5 of 5 attempts", "before starting a provider call, so nothing was generated",
		`leased to "req-1/rec-2" until 2025-03-01T10:20:00Z`, "no provider call was started under assignment 5", "--outcome failed")
	if text := all(r); strings.Contains(text, "may have") || strings.Contains(text, "--outcome completed") {
		t.Errorf("a task whose call never started is worded as possibly acted on:\n%s", text)
	}
}

// TestUnknownOutcomeOfAMarkedExpiredLease: with the call-start mark at the
// lease's version, the expired attempt's call was about to start; the review
// says exactly that whether it was sent cannot be known.
func TestUnknownOutcomeOfAMarkedExpiredLease(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC)
	x := task(ledger.StateUnknown)
	x.ErrorClass, x.ErrorMessage = "unknown_outcome", ledger.LeaseExpiredMessage
	x.AssignmentVersion, x.CallStartedVersion = 5, 5
	r := review.UnknownOutcome(x, "simulated", at, "the provider offers no readback")
	check(t, r, ledger.ReviewUnknownOutcome, "attempt 5 of 5: its worker recorded that its call to simulated", "was starting (the mark is written right before the call)",
		"whether the call reached simulated cannot be known")
	if strings.Contains(all(r), "is not recorded") {
		t.Errorf("a marked call is worded as unrecorded:\n%s", all(r))
	}
	x.CallStartedVersion = 4 // an earlier assignment's mark says nothing about this one
	check(t, review.UnknownOutcome(x, "simulated", at, "no readback"), ledger.ReviewUnknownOutcome, "may have been sent", "whether its call had started is not recorded")
}

// TestBudgetExhaustedOnAMarkedExpiredLease: the age budget ends on a
// running task whose lease expired after the call-start mark at its
// version; the review says the call may have reached the provider and that
// whether it was sent cannot be known (the worker may have stopped between
// the mark and the call).
func TestBudgetExhaustedOnAMarkedExpiredLease(t *testing.T) {
	t.Parallel()
	x := task(ledger.StateRunning)
	x.AssignmentVersion, x.CallStartedVersion = 5, 5
	r := review.BudgetExhaustedAfterClass(x, review.BudgetAge, review.Failure{}, time.Time{}, false)
	check(t, r, ledger.ReviewBudgetExhausted, "may have reached the provider", "was starting (the mark is written right before the call)",
		"whether the call reached the provider cannot be known")
	x.CallStartedVersion = 4 // an earlier assignment's mark says nothing about this one
	if text := all(review.BudgetExhaustedAfterClass(x, review.BudgetAge, review.Failure{}, time.Time{}, false)); strings.Contains(text, "cannot be known") {
		t.Errorf("an earlier assignment's mark is worded as this attempt's:\n%s", text)
	}
}

// TestBudgetExhaustedReadBackAbsent: a task whose unknown outcome was read
// back as credibly absent is parked without claiming the provider may have
// acted (the soak's false-uncertainty invariant at 10,000 tasks).
func TestBudgetExhaustedReadBackAbsent(t *testing.T) {
	task := &ledger.Task{TaskID: "t_absent", State: ledger.StateUnknown, Attempts: 5, MaxAttempts: 5, ErrorClass: "transient"}
	r := review.BudgetExhaustedReadBackAbsent(task, review.BudgetAttempts)
	all := strings.ToLower(r.Summary + " " + strings.Join(r.Known, " ") + " " + strings.Join(r.Uncertain, " "))
	if strings.Contains(all, "may have") || !strings.Contains(all, "no record") || !strings.Contains(all, "nothing was generated") {
		t.Fatalf("review %+v: want 'no record' and 'nothing was generated', never 'may have'", r)
	}
	if u := review.BudgetExhausted(task, review.BudgetAttempts); !strings.Contains(strings.ToLower(u.Summary), "may have") {
		t.Fatalf("an unresolved unknown outcome must still say it may have reached the provider: %q", u.Summary)
	}
}

// TestBudgetExhaustedKeepsAnEarlierOpenUncertainty: an earlier attempt's
// outcome left open (its expired lease re-queued: OpenUnknownMs) is
// reported as such although a later attempt recorded an error of its own
// (throttled), and the review never says nothing was generated.
func TestBudgetExhaustedKeepsAnEarlierOpenUncertainty(t *testing.T) {
	t.Parallel()
	tk := task(ledger.StateRetryWait)
	tk.ErrorClass, tk.ErrorMessage = "throttled", "429 from the provider"
	tk.OpenUnknownMs = time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC).UnixMilli()
	r := review.BudgetExhausted(tk, review.BudgetAge)
	check(t, r, ledger.ReviewBudgetExhausted, "an earlier attempt whose outcome was unknown may have reached the provider")
	if strings.Contains(all(r), "nothing was generated") {
		t.Errorf("an open earlier uncertainty is reviewed as nothing generated:\n%s", all(r))
	}
}

// An unknown task whose last attempt ended with an error of its own (a
// refusal) and which waits on an earlier attempt's open outcome
// (ledger.Ledger.AwaitReadback) is reviewed as that earlier attempt's
// question, not the last one's; an attempt recorded unknown itself still
// names the last.
func TestBudgetExhaustedNamesTheAttemptWhoseOutcomeIsOpen(t *testing.T) {
	t.Parallel()
	until := time.Date(2025, 3, 1, 11, 5, 0, 0, time.UTC)
	tk := task(ledger.StateUnknown)
	tk.ErrorClass, tk.ErrorMessage = "transient", "503 from the provider"
	tk.OpenUnknownMs = time.Date(2025, 3, 1, 10, 30, 0, 0, time.UTC).UnixMilli()
	r := review.BudgetExhaustedCallMayRun(tk, review.BudgetAge, until)
	check(t, r, ledger.ReviewBudgetExhausted, "an earlier attempt whose outcome is open may have reached the provider")
	if strings.Contains(r.Summary, "last attempt may have") {
		t.Errorf("the last attempt ended with its own refusal, yet the summary puts the uncertainty on it: %q", r.Summary)
	}

	tk.ErrorClass, tk.ErrorMessage = retrypolicy.UnknownOutcome.String(), "the reply was lost"
	r = review.BudgetExhaustedCallMayRun(tk, review.BudgetAge, until)
	check(t, r, ledger.ReviewBudgetExhausted, "its last attempt may have reached the provider")
}
