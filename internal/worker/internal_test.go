package worker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestVisibilitySeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want int32
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Millisecond, 1},
		{time.Second, 1},
		{1001 * time.Millisecond, 2},
		{60 * time.Second, 60},
		{12 * time.Hour, 43200},
		{48 * time.Hour, 43200},
		{time.Duration(1<<63 - 1), 43200},
	} {
		if got := visibilitySeconds(tc.d); got != tc.want {
			t.Errorf("visibilitySeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestMetricName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		OutcomeAckedDuplicate: "AckedDuplicate",
		OutcomeCompleted:      "Completed",
		"a_b_c":               "ABC",
	} {
		if got := metricName(in); got != want {
			t.Errorf("metricName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSafeMessage(t *testing.T) {
	t.Parallel()
	err := &retrypolicy.StatusError{StatusCode: 400, Body: "bad"}
	if got := safeMessage(retrypolicy.Classify(err), err); !strings.HasPrefix(got, "http_400: ") {
		t.Errorf("safeMessage = %q, want the reason first", got)
	}
	steered := retrypolicy.Permanent(err)
	if got := safeMessage(retrypolicy.Classify(steered), steered); strings.Contains(got, "steered") {
		t.Errorf("safeMessage = %q, want no steering noise", got)
	}
	long := errors.New(strings.Repeat("é", MaxErrorMessage))
	got := safeMessage(retrypolicy.Classify(long), long)
	if len(got) > MaxErrorMessage+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("long message not clipped on a rune boundary: %d bytes", len(got))
	}
}

func TestReviews(t *testing.T) {
	t.Parallel()
	task := &ledger.Task{TaskID: "t_aaaaaaaaaaaaaaaaaaaaaaaaaa", State: ledger.StateRunning, Attempts: 2, MaxAttempts: 5,
		DeadlineMs: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC).UnixMilli()}
	perr := retrypolicy.Misconfigured(&retrypolicy.StatusError{StatusCode: 403})
	r := review.ProviderConfig(task, "simulated", review.FailureOf(retrypolicy.Classify(perr), perr, "m"))
	if r.Reason != ledger.ReviewProviderConfig || !strings.Contains(r.Summary, "HTTP 403") ||
		len(r.Known) < 2 || len(r.Uncertain) == 0 || len(r.SafeActions) != 2 || !strings.Contains(r.Known[0], "attempt 2 of 5") {
		t.Errorf("provider_config review %+v", r)
	}

	now := time.Date(2026, 1, 1, 0, 59, 0, 0, time.UTC)
	c := retrypolicy.Classification{Class: retrypolicy.Transient, Reason: "http_429"}
	for budget, want := range map[string]string{
		"max_attempts": "used 5 of 5 attempts without a result, the last attempt failing with http_429 (transient)",
		"max_age":      "could not start its next attempt before its age budget ends at 2026-01-01T01:00:00Z",
	} {
		at, next := *task, time.Time{}
		if budget == "max_attempts" {
			at.Attempts = at.MaxAttempts
		} else {
			next = now.Add(2 * time.Minute)
		}
		r := review.BudgetExhaustedAfter(&at, budget, review.FailureOf(c, nil, "m"), next)
		if r.Reason != ledger.ReviewBudgetExhausted || !strings.Contains(r.Summary, want) || r.ErrorClass != "transient" || len(r.SafeActions) != 2 {
			t.Errorf("%s review %+v, want summary with %q", budget, r, want)
		}
	}
	// At the claim (no classification): the stored error and the expired
	// lease's uncertainty are used.
	task.ErrorClass = "unknown_outcome"
	r = review.BudgetExhausted(task, "max_age")
	if !strings.Contains(r.Summary, "was not finished within its age budget") || !strings.Contains(r.Summary, "unknown_outcome") ||
		!strings.Contains(r.Uncertain[0], "earlier attempt whose outcome was unknown: look up operation id") {
		t.Errorf("claim-time review %+v", r)
	}
	task.ErrorClass = ""
	r = review.BudgetExhausted(task, "max_age")
	if strings.Contains(r.Summary, "last attempt failing") || strings.Contains(r.Summary, "last recorded error") || !strings.Contains(r.Uncertain[0], "lease expired") {
		t.Errorf("claim-time review without an error %+v", r)
	}
}

func TestPoisonReviewOmitsBody(t *testing.T) {
	t.Parallel()
	const body = `{"prompt":"a secret prompt"}`
	_, perr := dispatch.Parse(body)
	corr := "c-1"
	rec := events.SQSMessage{MessageId: "m-1", Body: body,
		Attributes:        map[string]string{"ApproximateReceiveCount": "3"},
		MessageAttributes: map[string]events.SQSMessageAttribute{dispatch.CorrelationAttribute: {StringValue: &corr, DataType: "String"}}}
	r := poisonReview(rec, "abc", perr)
	all := fmt.Sprint(r)
	if strings.Contains(all, "secret prompt") {
		t.Errorf("poison review carries the body: %s", all)
	}
	if r.MessageID != "m-1" || r.BodyBytes != len(body) || r.CorrelationID != "c-1" || !strings.Contains(strings.Join(r.Known, "\n"), "receive count when recorded: 3") {
		t.Errorf("poison review %+v", r)
	}
}
