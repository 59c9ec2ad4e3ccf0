package ledger

import "github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

// PayloadRef is a claim check kept in the task item instead of a large
// input or result (DESIGN §12): the S3 object's bucket, key, SHA-256
// (lowercase hex) and size, as internal/payload writes and parses it (payload.Ref).
type PayloadRef struct {
	Bucket string `dynamodbav:"bucket" json:"bucket"`
	Key    string `dynamodbav:"key" json:"key"`
	SHA256 string `dynamodbav:"sha256" json:"sha256"`
	Size   int64  `dynamodbav:"size" json:"size"`
}

// HasResult reports whether a result is saved, inline or by reference.
func (t *Task) HasResult() bool { return t.Result != "" || t.ResultRef != nil }

// setResult sets the completion's result on u, inline or by reference, and
// returns its size in bytes for the item-size check.
func setResult(u *update, c Completion) int {
	if c.ResultRef != nil {
		av, _ := attributevalue.Marshal(c.ResultRef)
		u.set("result_ref", av)
		return int(c.ResultRef.Size)
	}
	u.set("result", str(c.Result))
	return len(c.Result)
}
