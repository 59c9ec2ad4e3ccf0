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
		n += len(name) + Value(v)
	}
	return n
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
		return sum(x.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sum(x.Value, Number)
	case *types.AttributeValueMemberBS:
		return sum(x.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		return 3 + sum(x.Value, func(e types.AttributeValue) int { return 1 + Value(e) })
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + Value(e)
		}
		return n
	}
	return 0
}

func sum[T any](xs []T, size func(T) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}

// Number returns the size of a number in DynamoDB's string form (package
// doc); sign, decimal point and exponent are not digits.
func Number(s string) int {
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, mant)
	digits = strings.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}

// UpdateLowerBound returns a lower bound of the size of the item an
// UpdateItem would leave: the key plus every "path = :value" assignment of
// its SET clause (name placeholders resolved through names). Attributes the
// item already has, and SET actions of other forms (arithmetic,
// if_not_exists, list_append), are not counted, so the item can only be
// larger — never smaller — than this bound.
func UpdateLowerBound(key map[string]types.AttributeValue, expr string, names map[string]string, values map[string]types.AttributeValue) int {
	n := Item(key)
	for _, part := range strings.Split(setClause(expr), ",") {
		lhs, rhs, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
		if !strings.HasPrefix(rhs, ":") || strings.ContainsAny(rhs, " ()+-") || strings.ContainsAny(lhs, " ().[]") {
			continue
		}
		v, ok := values[rhs]
		name, named := lhs, true
		if strings.HasPrefix(lhs, "#") {
			name, named = names[lhs]
		}
		if _, isKey := key[name]; !ok || !named || isKey {
			continue
		}
		n += len(name) + Value(v)
	}
	return n
}

// setClause returns the SET actions of an update expression (without the
// keyword), up to the next clause keyword.
func setClause(expr string) string {
	var out []string
	in := false
	for _, f := range strings.Fields(expr) {
		switch up := strings.ToUpper(f); {
		case up == "SET", up == "REMOVE", up == "ADD", up == "DELETE":
			in = up == "SET"
		case in:
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}
