package tasklist

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ErrBadCursor is returned (wrapped, from the signed cursors) for a page
// cursor a list did not produce.
var ErrBadCursor = errors.New("tasklist: malformed page cursor")

// The cursors of QueryLive and ListOpenReviews are a Query's
// LastEvaluatedKey as base64url JSON: they continue an operator's or the
// reconciler's walk of an index, and carry no viewer (cursor.go signs
// the caller-facing ones).

func encodeKeyCursor(k map[string]types.AttributeValue) (string, error) {
	if len(k) == 0 {
		return "", nil
	}
	var m map[string]any
	if err := attributevalue.UnmarshalMap(k, &m); err != nil {
		return "", fmt.Errorf("tasklist: encode cursor: %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("tasklist: encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decodeKeyCursor decodes a cursor of an index whose key has shape's
// attributes, each "S" or "N", or "S:<value>" where the Query fixes it (the
// partition it reads): the table's key (task_id) and no attribute but
// those, of those types and values (kumo's LastEvaluatedKey of an index
// holds the table's key alone). Anything else is ErrBadCursor; a key of
// this shape that DynamoDB still refuses is one too (badCursor).
func decodeKeyCursor(c string, shape map[string]string) (map[string]types.AttributeValue, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, ErrBadCursor
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || m["task_id"] == nil {
		return nil, ErrBadCursor
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		typ, fixed, isFixed := strings.Cut(shape[k], ":") // "": not the index's key
		switch x := v.(type) {
		case string:
			if typ != "S" || isFixed && x != fixed {
				return nil, ErrBadCursor
			}
			out[k] = str(x)
		case json.Number:
			if typ != "N" {
				return nil, ErrBadCursor
			}
			out[k] = &types.AttributeValueMemberN{Value: x.String()}
		default:
			return nil, ErrBadCursor
		}
	}
	return out, nil
}

// badCursor is err, or ErrBadCursor when a Query given a cursor (start)
// failed validation: DynamoDB refuses a start key that is not one of the
// Query's (another partition, outside its key condition).
func badCursor(start map[string]types.AttributeValue, err error) error {
	if start != nil && ledger.IsValidation(err) {
		return ErrBadCursor
	}
	return err
}
