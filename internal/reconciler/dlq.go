package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/review"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// dlqVisibility hides a received dead letter while this run handles it; a
// message it could not finish reappears for the next run.
const dlqVisibility = 60

// drainDLQ empties (a bounded part of) the task dead-letter queue.
func (r *run) drainDLQ(ctx context.Context) {
	h := r.h
	if h.DLQ == nil || h.DLQURL == "" {
		return
	}
	for range intOr(h.DLQBatches, DefaultDLQBatches) {
		if ctx.Err() != nil || !r.workLeft() {
			r.count(func(s *Summary) { s.Partial = true })
			return
		}
		out, err := h.DLQ.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(h.DLQURL),
			MaxNumberOfMessages: 10,
			// 0 is omitted on the wire, so the queue's own
			// ReceiveMessageWaitTimeSeconds applies: keep the DLQ's at 0
			// (template.yaml does) or each run's last receive long-polls.
			WaitTimeSeconds:             0,
			VisibilityTimeout:           dlqVisibility,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			r.fail(ctx, "receive dead letters", err)
			return
		}
		if len(out.Messages) == 0 {
			return
		}
		for _, m := range out.Messages {
			r.deadLetter(ctx, m)
		}
	}
}

// deadLetter handles one dead-letter message. It is deleted only after
// what it means is recorded: a review item for a poison body; for a task
// reference, nothing is needed (the task's own state and due_at drive it).
func (r *run) deadLetter(ctx context.Context, m types.Message) {
	h := r.h
	id, body := aws.ToString(m.MessageId), aws.ToString(m.Body)
	log := r.log.With("message_id", id, "body_bytes", len(body))
	msg, perr := dispatch.Parse(body)
	switch {
	case perr != nil:
		sum := sha256.Sum256([]byte(body))
		o := review.PoisonOptions{Queue: review.DeadLetterQueue}
		if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil && ms > 0 {
			o.SentAt = time.UnixMilli(ms)
		}
		o.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		rv := review.PoisonFrom(id, hex.EncodeToString(sum[:]), len(body), perr.Error(), o)
		if _, err := h.Ledger.PutPoison(ctx, rv); err != nil {
			r.fail(ctx, "record poison message", err, "message_id", id)
			return // not deleted: it reappears and is recorded next run
		}
		r.count(func(s *Summary) { s.PoisonMessages++ })
		log.WarnContext(ctx, "reconciler: poison message recorded for review", "review_id", ledger.PoisonID(id), "body_sha256", rv.BodySHA256)
	default:
		t, err := h.Ledger.Get(ctx, msg.TaskID)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			log.WarnContext(ctx, "reconciler: dead letter for a task that does not exist (expired or never created)", "task_id", msg.TaskID)
		case err != nil:
			r.fail(ctx, "read dead-lettered task", err, "task_id", msg.TaskID)
			return
		default:
			log.InfoContext(ctx, "reconciler: dead letter for a task reference", "task_id", msg.TaskID, "state", t.State)
		}
	}
	if _, err := h.DLQ.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(h.DLQURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		r.fail(ctx, "delete dead letter", err, "message_id", id)
		return
	}
	r.count(func(s *Summary) { s.DeadLettersDeleted++ })
}
