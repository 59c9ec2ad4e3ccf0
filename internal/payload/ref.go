package payload

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Ref is a claim check: where a payload lives in S3 and what it must be.
// SHA256 is the lowercase hex SHA-256 of the object's bytes; Size their
// count.
type Ref struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// ErrBadRef is wrapped by every error [ParseRef] and [RefFromAttribute]
// return.
var ErrBadRef = errors.New("payload: bad reference")

// maxKeyLen is S3's object key limit in bytes.
const maxKeyLen = 1024

// Validate reports the first thing wrong with r, wrapping [ErrBadRef].
func (r Ref) Validate() error {
	switch {
	case !validBucket(r.Bucket):
		return fmt.Errorf("%w: bucket %q is not a valid S3 bucket name", ErrBadRef, r.Bucket)
	case r.Key == "" || len(r.Key) > maxKeyLen || strings.HasPrefix(r.Key, "/") || strings.Contains(r.Key, ".."):
		return fmt.Errorf("%w: key must be 1-%d bytes, relative, without \"..\"", ErrBadRef, maxKeyLen)
	case !validHex256(r.SHA256):
		return fmt.Errorf("%w: sha256 must be 64 lowercase hex digits", ErrBadRef)
	case r.Size < 0:
		return fmt.Errorf("%w: size %d is negative", ErrBadRef, r.Size)
	}
	return nil
}

// ParseRef parses the JSON shape {"bucket","key","sha256","size"}
// strictly: unknown fields, missing fields, trailing data and invalid
// values are errors wrapping [ErrBadRef].
func ParseRef(data []byte) (Ref, error) {
	var raw struct {
		Bucket *string `json:"bucket"`
		Key    *string `json:"key"`
		SHA256 *string `json:"sha256"`
		Size   *int64  `json:"size"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Ref{}, fmt.Errorf("%w: %v", ErrBadRef, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) { // a stray ] or } too, which dec.More misses
		return Ref{}, fmt.Errorf("%w: trailing data after the object", ErrBadRef)
	}
	if raw.Bucket == nil || raw.Key == nil || raw.SHA256 == nil || raw.Size == nil {
		return Ref{}, fmt.Errorf("%w: bucket, key, sha256 and size are all required", ErrBadRef)
	}
	r := Ref{Bucket: *raw.Bucket, Key: *raw.Key, SHA256: *raw.SHA256, Size: *raw.Size}
	return r, r.Validate()
}

// Attribute returns r as a DynamoDB map attribute
// {bucket: S, key: S, sha256: S, size: N}.
func (r Ref) Attribute() types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"bucket": &types.AttributeValueMemberS{Value: r.Bucket},
		"key":    &types.AttributeValueMemberS{Value: r.Key},
		"sha256": &types.AttributeValueMemberS{Value: r.SHA256},
		"size":   &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Size, 10)},
	}}
}

// RefFromAttribute parses the map shape [Ref.Attribute] writes, as strictly
// as [ParseRef].
func RefFromAttribute(av types.AttributeValue) (Ref, error) {
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return Ref{}, fmt.Errorf("%w: want a map attribute, got %T", ErrBadRef, av)
	}
	if len(m.Value) != 4 {
		return Ref{}, fmt.Errorf("%w: want exactly bucket, key, sha256 and size, got %d attributes", ErrBadRef, len(m.Value))
	}
	str := func(name string) (string, error) {
		s, ok := m.Value[name].(*types.AttributeValueMemberS)
		if !ok {
			return "", fmt.Errorf("%w: %s must be a string attribute", ErrBadRef, name)
		}
		return s.Value, nil
	}
	var r Ref
	var err error
	if r.Bucket, err = str("bucket"); err != nil {
		return Ref{}, err
	}
	if r.Key, err = str("key"); err != nil {
		return Ref{}, err
	}
	if r.SHA256, err = str("sha256"); err != nil {
		return Ref{}, err
	}
	n, ok := m.Value["size"].(*types.AttributeValueMemberN)
	if !ok {
		return Ref{}, fmt.Errorf("%w: size must be a number attribute", ErrBadRef)
	}
	if r.Size, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
		return Ref{}, fmt.Errorf("%w: size %q is not an integer", ErrBadRef, n.Value)
	}
	return r, r.Validate()
}

// Digest returns the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checksumOf turns a hex SHA-256 into the base64 form S3's
// x-amz-checksum-sha256 uses.
func checksumOf(hexSum string) string {
	b, _ := hex.DecodeString(hexSum)
	return base64.StdEncoding.EncodeToString(b)
}

// hexOfChecksum is the inverse of checksumOf; "" when v is not a base64
// SHA-256 (a composite multipart checksum "…-N", say).
func hexOfChecksum(v string) string {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != sha256.Size {
		return ""
	}
	return hex.EncodeToString(b)
}

func validHex256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (c == '-' || c == '.') && i > 0 && i < len(b)-1
		if !ok {
			return false
		}
	}
	return true
}
