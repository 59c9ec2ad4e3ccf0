package worker

import (
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// poisonReview describes a message on the task queue that is not a task
// reference (package review words every review, never with the body).
func poisonReview(rec events.SQSMessage, bodySHA string, perr error) ledger.Review {
	o := review.PoisonOptions{Queue: review.TaskQueue}
	if n, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"]); err == nil && n > 0 {
		o.ReceiveCount = n
	}
	if ms, err := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64); err == nil && ms > 0 {
		o.SentAt = time.UnixMilli(ms)
	}
	if a, ok := rec.MessageAttributes[dispatch.CorrelationAttribute]; ok && a.StringValue != nil {
		o.CorrelationID = *a.StringValue
	}
	return review.PoisonFrom(rec.MessageId, bodySHA, len(rec.Body), perr.Error(), o)
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
