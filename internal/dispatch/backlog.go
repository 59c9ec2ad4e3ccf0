package dispatch

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// BacklogSQS is the subset of the SQS client Backlog uses.
type BacklogSQS interface {
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Backlog reads how many messages of a queue are waiting for a consumer.
// The outbox relay asks it once per run: while visible messages wait, a
// queued task's message is most likely among them, and a re-send would
// only queue a duplicate behind the same backlog, and re-sending every
// queued task each DispatchTimeout would keep the queue from ever catching
// up (DESIGN.md §5).
type Backlog struct {
	SQS      BacklogSQS
	QueueURL string
}

// Visible returns SQS's ApproximateNumberOfMessages: the messages available
// for retrieval (not in flight, not delayed). It is approximate by SQS's
// own definition; callers use it as a signal, never for correctness.
func (b *Backlog) Visible(ctx context.Context) (int, error) {
	out, err := b.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       &b.QueueURL,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, fmt.Errorf("dispatch: queue backlog: %w", err)
	}
	s := out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("dispatch: queue backlog: ApproximateNumberOfMessages %q is not a count", s)
	}
	return n, nil
}
