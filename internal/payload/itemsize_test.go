package payload

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// approxSize is a stand-in for the ledger's item-size function, close to
// DynamoDB's rules for the S, N and M attributes used here (names + values,
// 3 bytes per map/list, numbers at most 21 bytes).
func approxSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return min(len(v.Value), 21)
	case *types.AttributeValueMemberM:
		return 3 + approxSize(v.Value)
	}
	return 1
}

func s(n int) types.AttributeValue {
	return &types.AttributeValueMemberS{Value: strings.Repeat("x", n)}
}

func TestPlanOffload(t *testing.T) {
	t.Parallel()
	refSize := approxSize(map[string]types.AttributeValue{"r": worstRef.Attribute()})
	cases := []struct {
		name   string
		item   map[string]types.AttributeValue
		budget int
		want   []string
		err    error
	}{
		{"small stays inline", map[string]types.AttributeValue{"pk": s(20), "input": s(100), "result": s(200)}, 0, nil, nil},
		{"over the inline limit goes", map[string]types.AttributeValue{"pk": s(20), "input": s(DefaultInlineLimit + 1), "result": s(10)}, 0, []string{"input"}, nil},
		{"largest first until it fits", map[string]types.AttributeValue{"pk": s(20), "input": s(3000), "result": s(3500), "note": s(100)}, 3500, []string{"result"}, nil},
		{"both when one is not enough", map[string]types.AttributeValue{"pk": s(20), "input": s(3000), "result": s(3500)}, 1000, []string{"result", "input"}, nil},
		{"fixed part too large", map[string]types.AttributeValue{"pk": s(20), "history": s(500_000), "input": s(10)}, 0, []string{"input"}, ErrItemTooLarge},
		{"absent candidate ignored", map[string]types.AttributeValue{"pk": s(20)}, 0, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlanOffload(c.item, []string{"input", "result", "input"}, DefaultInlineLimit, approxSize, c.budget)
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if !reflect.DeepEqual(got.Names, c.want) {
				t.Fatalf("offload %v, want %v", got.Names, c.want)
			}
			budget := c.budget
			if budget <= 0 {
				budget = DefaultItemBudget
			}
			if c.err == nil && got.Size > budget {
				t.Fatalf("planned size %d over budget %d", got.Size, budget)
			}
		})
	}
	if refSize > 400 {
		t.Errorf("a reference costs %d bytes in the item; it should be a few hundred at most", refSize)
	}
}

// TestPlanOffloadNeverExceedsLimit: whatever the payload sizes, an item
// that PlanOffload accepts is under DynamoDB's 400 KB with the headroom.
func TestPlanOffloadNeverExceedsLimit(t *testing.T) {
	t.Parallel()
	for _, in := range []int{0, 100, 8 << 10, 30 << 10, 399 << 10, 1 << 20} {
		for _, res := range []int{0, 4 << 10, 200 << 10, 2 << 20} {
			item := map[string]types.AttributeValue{"pk": s(40), "input": s(in), "result": s(res)}
			for _, limit := range []int{-1, DefaultInlineLimit, MaxItemBytes} {
				p, err := PlanOffload(item, []string{"input", "result"}, limit, approxSize, 0)
				if err != nil {
					t.Fatalf("in=%d res=%d limit=%d: %v", in, res, limit, err)
				}
				if p.Size > DefaultItemBudget || p.Size+50<<10 > MaxItemBytes {
					t.Fatalf("in=%d res=%d limit=%d: planned %d bytes", in, res, limit, p.Size)
				}
			}
		}
	}
}
