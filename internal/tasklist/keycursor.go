package tasklist

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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

func decodeKeyCursor(c string) (map[string]types.AttributeValue, error) {
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
	if err := d.Decode(&m); err != nil {
		return nil, ErrBadCursor
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k] = str(x)
		case json.Number:
			out[k] = &types.AttributeValueMemberN{Value: x.String()}
		default:
			return nil, ErrBadCursor
		}
	}
	return out, nil
}
