package itemsize_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"0", 1}, {"1", 2}, {"12", 2}, {"123", 3}, {"-123", 3}, {"1.5", 2},
		{"1000", 2}, {"0.001", 2}, {"1700000000000", 2}, {"1764547200123", 8}, {"12345678901234567890", 11}, {"1.23E+5", 3},
	} {
		if got := itemsize.Number(c.in); got != c.want {
			t.Errorf("Number(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestItem(t *testing.T) {
	item := map[string]types.AttributeValue{
		"task_id": &types.AttributeValueMemberS{Value: "t_abc"},              // 7 + 5
		"n":       &types.AttributeValueMemberN{Value: "123"},                // 1 + 3
		"ok":      &types.AttributeValueMemberBOOL{Value: true},              // 2 + 1
		"nul":     &types.AttributeValueMemberNULL{Value: true},              // 3 + 1
		"bin":     &types.AttributeValueMemberB{Value: []byte{1, 2, 3, 4}},   // 3 + 4
		"héllo":   &types.AttributeValueMemberS{Value: "é"},                  // 6 + 2
		"ss":      &types.AttributeValueMemberSS{Value: []string{"ab", "c"}}, // 2 + 3
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{ // 1 + 3 + (1+2) + (1+1)
			&types.AttributeValueMemberS{Value: "xy"}, &types.AttributeValueMemberBOOL{},
		}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{ // 1 + 3 + (1+1+1)
			"k": &types.AttributeValueMemberS{Value: "v"},
		}},
		"empty": &types.AttributeValueMemberL{}, // 5 + 3
	}
	want := 12 + 4 + 3 + 4 + 7 + 8 + 5 + 9 + 7 + 8
	if got := itemsize.Item(item); got != want {
		t.Fatalf("Item = %d, want %d", got, want)
	}
}

func TestLimitBoundary(t *testing.T) {
	name := "result"
	v := strings.Repeat("x", itemsize.MaxItemBytes-len(name))
	item := map[string]types.AttributeValue{name: &types.AttributeValueMemberS{Value: v}}
	if got := itemsize.Item(item); got != itemsize.MaxItemBytes {
		t.Fatalf("Item = %d, want exactly the limit %d", got, itemsize.MaxItemBytes)
	}
}

func TestUpdateLowerBound(t *testing.T) {
	key := map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: "t_1"}} // 10
	expr := "SET #result = :result, #n = #n + :one, #state = :s, #x = if_not_exists(#x, :d) REMOVE #lease_owner"
	names := map[string]string{"#result": "result", "#n": "n", "#state": "state", "#x": "x", "#lease_owner": "lease_owner"}
	values := map[string]types.AttributeValue{
		":result": &types.AttributeValueMemberS{Value: "abcd"}, // 6 + 4
		":one":    &types.AttributeValueMemberN{Value: "1"},
		":s":      &types.AttributeValueMemberS{Value: "done"}, // 5 + 4
		":d":      &types.AttributeValueMemberS{Value: strings.Repeat("z", 100)},
	}
	if got, want := itemsize.UpdateLowerBound(key, expr, names, values), 10+10+9; got != want {
		t.Fatalf("UpdateLowerBound = %d, want %d (only plain assignments and the key)", got, want)
	}
}
