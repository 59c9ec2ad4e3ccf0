package bench

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A write bills its global secondary index updates by DynamoDB's rules:
// entering the index one write, leaving it one, a changed index key two,
// a changed projected attribute one, anything else none.
func TestIndexWriteUnits(t *testing.T) {
	t.Parallel()
	byState := []indexSchema{{keys: []string{"task_id", "state_shard", "due_at"}, include: []string{"state"}}}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	queued := map[string]types.AttributeValue{"task_id": s("t_1"), "state_shard": s("queued#03"), "due_at": n("100"), "state": s("queued"), "input": s("x")}
	running := map[string]types.AttributeValue{"task_id": s("t_1"), "state_shard": s("running#03"), "due_at": n("200"), "state": s("running"), "input": s("x")}
	renamed := map[string]types.AttributeValue{"task_id": s("t_1"), "state_shard": s("queued#03"), "due_at": n("100"), "state": s("other"), "input": s("x")}
	otherInput := map[string]types.AttributeValue{"task_id": s("t_1"), "state_shard": s("queued#03"), "due_at": n("100"), "state": s("queued"), "input": s("y")}
	done := map[string]types.AttributeValue{"task_id": s("t_1"), "state": s("completed"), "input": s("x")}
	big := map[string]types.AttributeValue{"task_id": s("t_1"), "state_shard": s("queued#03"), "due_at": n("100"), "state": s(string(make([]byte, 1500)))}
	for _, c := range []struct {
		name          string
		before, after map[string]types.AttributeValue
		want          float64
	}{
		{"created in the index", nil, queued, 1},
		{"claimed: key changed", queued, running, 2},
		{"completed: leaves the index", running, done, 1},
		{"projected attribute changed", queued, renamed, 1},
		{"unprojected attribute changed", queued, otherInput, 0},
		{"never in the sparse index", done, done, 0},
		{"created outside the index", nil, done, 0},
		{"a 1.5 KB entry", nil, big, 2},
		{"conditional write failed: unchanged", queued, queued, 0},
	} {
		if got := indexWriteUnits(byState, c.before, c.after); got != c.want {
			t.Errorf("%s: %g index write units, want %g", c.name, got, c.want)
		}
	}
	if got := indexWriteUnits([]indexSchema{{keys: []string{"task_id", "state_shard", "due_at"}, all: true}}, queued, otherInput); got != 1 {
		t.Errorf("ALL projection, an attribute changed: %g index write units, want 1", got)
	}
}
