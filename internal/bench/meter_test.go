package bench

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
)

// A write bills its global secondary index updates by DynamoDB's rules:
// entering the index one write, leaving it one, a changed index key two,
// a changed projected attribute one, anything else none.
func TestIndexWriteUnits(t *testing.T) {
	t.Parallel()
	byState := []indexSchema{{name: "by_state", keys: []string{"task_id", "state_shard", "due_at"}, include: []string{"state"}}}
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
		if got := indexWriteUnits(byState, c.before, c.after)["by_state"]; got != c.want {
			t.Errorf("%s: %g index write units, want %g", c.name, got, c.want)
		}
	}
	if got := indexWriteUnits([]indexSchema{{name: "all", keys: []string{"task_id", "state_shard", "due_at"}, all: true}}, queued, otherInput)["all"]; got != 1 {
		t.Errorf("ALL projection, an attribute changed: %g index write units, want 1", got)
	}
	// by_owner holds only what the create writes (scope, created_ms,
	// kind): the put is its one write; no later write of the task moves it.
	byOwner := []indexSchema{{name: "by_owner", keys: []string{"task_id", "scope", "created_ms"}, include: []string{"kind"}}}
	owned := func(m map[string]types.AttributeValue) map[string]types.AttributeValue {
		o := map[string]types.AttributeValue{"scope": s("jwt:a"), "created_ms": &types.AttributeValueMemberN{Value: "100"}, "kind": s("generate")}
		for k, v := range m {
			o[k] = v
		}
		return o
	}
	life := []map[string]types.AttributeValue{nil, owned(queued), owned(running), owned(done)}
	var total float64
	for i := 1; i < len(life); i++ {
		total += indexWriteUnits(byOwner, life[i-1], life[i])["by_owner"]
	}
	if total != 1 {
		t.Errorf("a task's life (create, claim, complete) bills %g by_owner write units, want 1", total)
	}
}

// The meter sizes every write from reads of the item around it. A read
// that fails is retried, and the units are the ones the write billed; one
// that keeps failing fails the meter (never a row priced from a stale or
// missing item) without failing the metered call: the system under test
// never sees the meter.
func TestMeterProbeFailures(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		table := e.Names.TasksTable
		for _, c := range []struct {
			name     string
			failures int // probe GetItems refused before one succeeds
			wantErr  bool
		}{
			{"transient", probeAttempts - 1, false},
			{"persistent", 1 << 30, true},
		} {
			refused := 0
			inj := faultinject.New(faultinject.ScheduleFunc(func(c2 faultinject.Call) faultinject.Kind {
				if c2.Operation == "GetItem" && refused < c.failures {
					refused++
					return faultinject.SendFailure
				}
				return ""
			}))
			pc := e.AWS.Copy()
			pc.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), inj.Register)
			pc.RetryMaxAttempts = 1
			m := newMeter(awsclient.DynamoDB(pc))
			if _, err := m.schema(ctx, table); err != nil { // read before the faults count
				t.Fatal(err)
			}
			mc := e.AWS.Copy()
			mc.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), m.register)
			db := awsclient.DynamoDB(mc)
			id := "t_meterprobe" + c.name
			item := map[string]types.AttributeValue{
				"task_id": &types.AttributeValueMemberS{Value: id}, "state_shard": &types.AttributeValueMemberS{Value: "queued#01"},
				"due_at": &types.AttributeValueMemberN{Value: "100"}, "pad": &types.AttributeValueMemberS{Value: strings.Repeat("x", 1500)},
			}
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				t.Fatalf("%s: the metered PutItem failed: %v (a probe failure must not reach the caller)", c.name, err)
			}
			// Completion-like: leaves the index, item stays over 1 KB.
			if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: map[string]types.AttributeValue{"task_id": item["task_id"]},
				UpdateExpression:         aws.String("REMOVE #ss, #due"),
				ExpressionAttributeNames: map[string]string{"#ss": "state_shard", "#due": "due_at"},
			}); err != nil {
				t.Fatalf("%s: the metered UpdateItem failed: %v", c.name, err)
			}
			got, err := e.DDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"task_id": item["task_id"]}, ConsistentRead: aws.Bool(true)})
			if err != nil || got.Item["state_shard"] != nil || got.Item["pad"] == nil {
				t.Fatalf("%s: item after the metered writes = %v, %v; want it written as asked", c.name, got.Item, err)
			}
			if c.wantErr {
				if m.err() == nil {
					t.Errorf("%s: every probe refused, meter.err() = nil: the units %g were guessed", c.name, m.usage().WRU)
				}
				continue
			}
			if err := m.err(); err != nil {
				t.Errorf("%s: %d refused probes, then success: meter.err() = %v, want nil", c.name, c.failures, err)
			}
			// Put: 2 units (1.5 KB) + entering by_state 1; update: 2 + leaving 1.
			if u := m.usage().WRU; u != 6 {
				t.Errorf("%s: %g write units, want 6 (a refused probe retried, not skipped)", c.name, u)
			}
			if refused != c.failures {
				t.Errorf("%s: %d probes refused, want %d", c.name, refused, c.failures)
			}
		}
	})
}

// A write that ends in an error may have been applied: its reply lost
// after the write, or the SDK's retry of an applied write refused by its
// own effect (the ledger then finds its write by its nonce). The meter
// bills it by the item read after it — the 1.5 KB item grown to 3 KB:
// 3 units — as it bills a refused condition by the item as it is (2) and
// a write never performed (a throttle) not at all.
func TestMeterBillsWhatAFailedWriteDid(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		table := e.Names.TasksTable
		for _, c := range []struct {
			name string
			fail func(stack *middleware.Stack) error
			want float64
		}{
			{"reply lost after the write", loseReply(faultinject.LostReply), 3},
			{"the SDK's retry refused by the write's own effect", retryRefused, 3},
			{"throttled, never sent", loseReply(faultinject.Throttle), 0},
		} {
			m := newMeter(awsclient.DynamoDB(e.AWS))
			mc := e.AWS.Copy()
			mc.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), m.register, c.fail)
			id := "t_meterfailed" + strings.ReplaceAll(c.name[:5], " ", "")
			key := map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}}
			if _, err := e.DDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"task_id": key["task_id"], "pad": &types.AttributeValueMemberS{Value: strings.Repeat("x", 1500)},
			}}); err != nil {
				t.Fatal(err)
			}
			_, err := awsclient.DynamoDB(mc).UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: key,
				UpdateExpression:          aws.String("SET #r = :r"),
				ConditionExpression:       aws.String("attribute_not_exists(#r)"),
				ExpressionAttributeNames:  map[string]string{"#r": "result"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberS{Value: strings.Repeat("y", 1500)}},
			})
			if err == nil {
				t.Fatalf("%s: the write succeeded; the fault was not injected", c.name)
			}
			if got := m.usage().WRU; got != c.want || m.err() != nil {
				t.Errorf("%s (%v): %g write units (meter error %v), want %g", c.name, err, got, m.err(), c.want)
			}
		}
		// A refused condition bills the item as it is.
		m := newMeter(awsclient.DynamoDB(e.AWS))
		mc := e.AWS.Copy()
		mc.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), m.register)
		_, err := awsclient.DynamoDB(mc).UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: "t_meterfailedthrot"}},
			UpdateExpression: aws.String("SET #r = :r"), ConditionExpression: aws.String("attribute_exists(#r)"),
			ExpressionAttributeNames:  map[string]string{"#r": "result"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberS{Value: "z"}},
		})
		if err == nil || m.usage().WRU != 2 {
			t.Errorf("a refused condition on a 1.5 KB item: %v, %g write units, want refused and 2", err, m.usage().WRU)
		}
	})
}

// loseReply injects k into the call, inside the meter.
func loseReply(k faultinject.Kind) func(*middleware.Stack) error {
	return faultinject.New(faultinject.ScheduleFunc(func(faultinject.Call) faultinject.Kind { return k })).Register
}

// retryRefused loses the first response inside the SDK's retry loop (a
// 500 after the write), so the SDK sends the write again and its
// condition fails on the write's own effect.
func retryRefused(s *middleware.Stack) error {
	var lost atomic.Bool
	return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("loseFirstReply",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if err == nil && lost.CompareAndSwap(false, true) {
				resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 500, Header: http.Header{}}}
				return out, md, &smithyhttp.ResponseError{Response: resp, Err: errors.New("connection reset after the write")}
			}
			return out, md, err
		}), middleware.After)
}
