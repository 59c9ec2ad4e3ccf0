package itemsize

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxItemBytes is DynamoDB's item size limit: 400 KB (binary kilobytes).
const MaxItemBytes = 400 * 1024

// Item returns the size of an item: the sum of its attributes' name and
// value sizes.
func Item(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += Attribute(name, v)
	}
	return n
}

// Attribute returns the size of one top-level attribute: its name's bytes
// plus its value's size.
func Attribute(name string, v types.AttributeValue) int {
	return len(name) + Value(v)
}

// Value returns the size of a value without a name.
func Value(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return Number(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range x.Value {
			n += Number(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range x.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + Value(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + Value(e)
		}
		return n
	}
	return 0
}

// Number returns the size of a number in DynamoDB's string form: 1 byte per
// two significant digits (rounded up) plus 1 byte. Sign, decimal point and
// exponent are not digits; leading and trailing zeroes are trimmed.
func Number(s string) int {
	mant := s
	if i := strings.IndexAny(mant, "eE"); i >= 0 {
		mant = mant[:i]
	}
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, mant)
	digits = strings.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}
