package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// CorrelationAttribute is the SQS message attribute carrying the correlation id.
const CorrelationAttribute = "correlation_id"

// MaxBody is the largest body Parse looks at; a task reference is ~45 bytes.
const MaxBody = 1024

// Message is the body of a task message.
type Message struct {
	TaskID string `json:"task_id"`
}

// SQS is the subset of the SQS client the sender uses.
type SQS interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Sender sends task messages to one queue.
type Sender struct {
	SQS      SQS
	QueueURL string
}

// Send enqueues a reference to taskID. delay (0..15 min) postpones delivery.
func (s *Sender) Send(ctx context.Context, taskID, correlationID string, delay time.Duration) error {
	body, _ := json.Marshal(Message{TaskID: taskID})
	in := &sqs.SendMessageInput{
		QueueUrl:    &s.QueueURL,
		MessageBody: aws.String(string(body)),
	}
	if correlationID != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{
			CorrelationAttribute: {DataType: aws.String("String"), StringValue: aws.String(correlationID)},
		}
	}
	if delay > 0 {
		if delay > 15*time.Minute {
			delay = 15 * time.Minute
		}
		in.DelaySeconds = int32(delay / time.Second)
	}
	if _, err := s.SQS.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("dispatch: send task %s: %w", taskID, err)
	}
	return nil
}

// ErrPoison is returned (wrapped) by Parse for a body that is not a task
// reference. Such a message must never be retried: it goes to review.
var ErrPoison = errors.New("dispatch: not a task reference")

// Parse reads a message body strictly: a JSON object with exactly one field,
// task_id, holding a well-formed task id.
func Parse(body string) (Message, error) {
	if len(body) > MaxBody {
		return Message{}, fmt.Errorf("%w: body is %d bytes (at most %d)", ErrPoison, len(body), MaxBody)
	}
	var m Message
	d := json.NewDecoder(bytes.NewReader([]byte(body)))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrPoison, err)
	}
	if d.More() {
		return Message{}, fmt.Errorf("%w: trailing data after the JSON object", ErrPoison)
	}
	if !ledger.ValidTaskID(m.TaskID) {
		return Message{}, fmt.Errorf("%w: task_id %q is not a task id", ErrPoison, truncate(m.TaskID, 40))
	}
	return m, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
