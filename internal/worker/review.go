package worker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Review items must tell a person what is known, what is uncertain and
// which actions are safe (DESIGN §4). They hold ids, classes, codes, hashes
// and sizes, never task input or results.

const (
	actionResolveFailed = "resolve as failed if the task is no longer wanted"
	actionRetryBudget   = "retry from the review table once the cause has cleared: the task is re-queued with a fresh budget " +
		"under the same task id and operation id, so a provider that honours idempotency keys does not act twice"
)

// providerConfigReview explains a credentials/configuration rejection.
func providerConfigReview(provider string, t *ledger.Task, c retrypolicy.Classification, perr error, msg string) ledger.Review {
	what := c.Reason
	if code := httpStatus(perr); code != 0 {
		what = fmt.Sprintf("HTTP %d", code)
	}
	return ledger.Review{
		Reason:       ledger.ReviewProviderConfig,
		Summary:      fmt.Sprintf("The provider rejected the request's credentials or configuration (%s); no result was produced.", what),
		ErrorClass:   c.Class.String(),
		ErrorMessage: msg,
		Known: []string{
			fmt.Sprintf("provider %q answered attempt %d of %d with %s (%s)", provider, t.Attempts, t.MaxAttempts, what, c.Class),
			"a credentials, permission or model rejection happens before the provider generates anything: nothing was performed or billed for this attempt",
			fmt.Sprintf("no result is saved; the task keeps its task id and operation id %s", t.OperationID()),
		},
		Uncertain: []string{
			"whether the credentials, permissions or model id are wrong for every task or only for this one (other open provider_config reviews at the same time point to the configuration)",
		},
		SafeActions: []string{
			"fix the provider credentials/model configuration, then retry from the review table",
			actionResolveFailed,
		},
	}
}

// budgetReview explains a task that ran out of attempts or age. c is the
// last failure's classification (zero when the claim found the budget gone;
// the task's stored error is used then).
func budgetReview(t *ledger.Task, budget string, c retrypolicy.Classification, msg string, now time.Time) ledger.Review {
	class, last := "", ""
	switch {
	case c.Class != 0:
		class = c.Class.String()
		last = fmt.Sprintf("; the last failure was %s (%s)", c.Reason, class)
	case t.ErrorClass != "":
		class = t.ErrorClass
		last = fmt.Sprintf("; the last failure was %s", class)
	}
	deadline := time.UnixMilli(t.DeadlineMs).UTC()
	summary := fmt.Sprintf("The task's age budget ran out at %s before it completed%s. No result was saved.", deadline.Format(time.RFC3339), last)
	if c.Class != 0 && budget == retrypolicy.ReasonMaxAge {
		summary = fmt.Sprintf("The task's next attempt could not start before its age budget ends at %s%s. No result was saved.", deadline.Format(time.RFC3339), last)
	}
	if budget == retrypolicy.ReasonMaxAttempts {
		summary = fmt.Sprintf("The task used all %d of its attempts without completing%s. No result was saved.", t.MaxAttempts, last)
	}
	known := []string{
		fmt.Sprintf("attempts made: %d of %d", t.Attempts, t.MaxAttempts),
		fmt.Sprintf("age budget: until %s (checked at %s)", deadline.Format(time.RFC3339), now.UTC().Format(time.RFC3339)),
		fmt.Sprintf("budget exhausted: %s", budget),
		"no result is saved for this task",
	}
	var uncertain []string
	switch {
	case c.Class == retrypolicy.UnknownOutcome || t.ErrorClass == retrypolicy.UnknownOutcome.String():
		uncertain = append(uncertain, "whether the provider performed an earlier attempt whose outcome was uncertain: read it back (operation id "+t.OperationID()+") before resolving")
	case t.State == ledger.StateRunning && c.Class == 0:
		uncertain = append(uncertain, fmt.Sprintf("whether the provider call of attempt %d took effect before its worker's lease expired (operation id %s)", t.Attempts, t.OperationID()))
	}
	uncertain = append(uncertain, "whether the cause of the failures (throttling, an outage, a slow provider) has cleared")
	return ledger.Review{
		Reason:       ledger.ReviewBudgetExhausted,
		Summary:      summary,
		ErrorClass:   class,
		ErrorMessage: msg,
		Known:        known,
		Uncertain:    uncertain,
		SafeActions:  []string{actionRetryBudget, actionResolveFailed},
	}
}

// poisonReview describes a message that is not a task reference.
func poisonReview(rec events.SQSMessage, bodySHA string, perr error) ledger.Review {
	known := []string{
		fmt.Sprintf("SQS message id %s", rec.MessageId),
		fmt.Sprintf("body: %d bytes, sha256 %s (the body itself is not stored)", len(rec.Body), bodySHA),
		"why it was rejected: " + clip(strings.TrimPrefix(perr.Error(), dispatch.ErrPoison.Error()+": "), 200),
		"the message was acknowledged (deleted from the queue); no task was read or changed",
	}
	if n := rec.Attributes["ApproximateReceiveCount"]; n != "" {
		known = append(known, "receive count when recorded: "+n)
	}
	if ts := rec.Attributes["SentTimestamp"]; ts != "" {
		known = append(known, "sent at (epoch ms): "+ts)
	}
	r := ledger.Review{
		MessageID:    rec.MessageId,
		Summary:      `A message on the task queue is not a task reference ({"task_id":"t_…"}), so no task could be run for it; it was acknowledged and will not be retried.`,
		ErrorClass:   ledger.ReviewPoisonMessage,
		ErrorMessage: clip(perr.Error(), MaxErrorMessage),
		BodySHA256:   bodySHA,
		BodyBytes:    len(rec.Body),
		Known:        known,
		Uncertain:    []string{"which producer sent it and whether it was meant to start a task"},
		SafeActions: []string{
			"find and fix the producer (the message id and sent time identify it in the producer's logs); nothing in the tasks table needs repair",
			"if a task was intended, submit it through the API (POST /tasks with its Idempotency-Key)",
			"resolve this review item once the producer is fixed",
		},
	}
	if a, ok := rec.MessageAttributes[dispatch.CorrelationAttribute]; ok && a.StringValue != nil {
		r.CorrelationID = clip(*a.StringValue, 128)
	}
	return r
}

// httpStatus finds an HTTP status code in err's chain, 0 if none.
func httpStatus(err error) int {
	var se *retrypolicy.StatusError
	if errors.As(err, &se) {
		return se.StatusCode
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
