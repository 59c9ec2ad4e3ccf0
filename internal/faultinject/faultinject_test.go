package faultinject_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type bundle struct {
	env      *testenv.Env
	inj      *faultinject.Injector
	ddb      *dynamodb.Client // through the injector
	sqs      *sqs.Client      // through the injector
	mu       sync.Mutex
	observed []faultinject.Call
}

func setup(t *testing.T, e *testenv.Env, s faultinject.Schedule) *bundle {
	t.Helper()
	b := &bundle{env: e, inj: faultinject.New(s)}
	b.inj.OnResult = func(c faultinject.Call, _, _ any, _ error) {
		b.mu.Lock()
		b.observed = append(b.observed, c)
		b.mu.Unlock()
	}
	cfg := e.AWS.Copy()
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, e.AWS.APIOptions...), b.inj.Register)
	b.ddb = awsclient.DynamoDB(cfg)
	b.sqs = awsclient.SQS(cfg)
	return b
}

func (b *bundle) put(ctx context.Context, id string) error {
	_, err := b.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(b.env.Names.TasksTable),
		Item: map[string]types.AttributeValue{
			"task_id": &types.AttributeValueMemberS{Value: id},
			"state":   &types.AttributeValueMemberS{Value: "queued"},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": "task_id"},
	})
	return err
}

// exists reads through the clean client (no injector).
func (b *bundle) exists(t *testing.T, id string) bool {
	t.Helper()
	out, err := b.env.DDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(b.env.Names.TasksTable),
		Key:            map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Item) > 0
}

func TestDynamoDBFaults(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		throttled, lost := ledger.TaskID("s", "throttled"), ledger.TaskID("s", "lost")
		plan := faultinject.NewPlan()
		plan.Add(throttled, faultinject.Step{Service: "DynamoDB", Operation: "PutItem", N: 1, Kind: faultinject.Throttle})
		plan.Add(lost, faultinject.Step{Service: "DynamoDB", Operation: "PutItem", N: 1, Kind: faultinject.LostReply})
		b := setup(t, e, plan)

		// A throttled put never reaches the table and looks like the real
		// throttle to the ledger's classifier.
		err := b.put(ctx, throttled)
		var ae smithy.APIError
		if !ledger.IsThrottle(err) || !errors.As(err, &ae) || ae.ErrorCode() != "ProvisionedThroughputExceededException" {
			t.Fatalf("throttled put: err = %v, want a DynamoDB throttling error", err)
		}
		if b.exists(t, throttled) {
			t.Fatal("a throttled put wrote the item")
		}
		// The second put of the same task is not scripted: it goes through.
		if err := b.put(ctx, throttled); err != nil {
			t.Fatalf("second put: %v", err)
		}
		if !b.exists(t, throttled) {
			t.Fatal("second put did not write")
		}

		// A lost reply: the caller sees a timeout, yet the item is there,
		// and a retry meets the condition the first write satisfied.
		err = b.put(ctx, lost)
		var lr *faultinject.LostReplyError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &lr) || lr.Call.N != 1 {
			t.Fatalf("lost put: err = %v, want a LostReplyError wrapping context.DeadlineExceeded", err)
		}
		if !b.exists(t, lost) {
			t.Fatal("the lost-reply put did not reach the table")
		}
		var ccf *types.ConditionalCheckFailedException
		if err := b.put(ctx, lost); !errors.As(err, &ccf) {
			t.Fatalf("retry after a lost reply: err = %v, want ConditionalCheckFailed", err)
		}

		if got := b.inj.Total(faultinject.Throttle); got != 1 {
			t.Errorf("throttles injected = %d, want 1", got)
		}
		if got := b.inj.Total(faultinject.LostReply); got != 1 {
			t.Errorf("lost replies injected = %d, want 1", got)
		}
		want := []faultinject.Count{
			{Kind: faultinject.LostReply, Service: "DynamoDB", Operation: "PutItem", N: 1},
			{Kind: faultinject.Throttle, Service: "DynamoDB", Operation: "PutItem", N: 1},
		}
		if got := b.inj.Injected(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("Injected() = %+v, want %+v", got, want)
		}
		// OnResult saw the calls that reached the server: all but the
		// throttled one (3 of 4).
		b.mu.Lock()
		n := len(b.observed)
		b.mu.Unlock()
		if n != 3 {
			t.Errorf("OnResult saw %d calls, want 3", n)
		}
	})
}

func TestSQSFaults(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		failed, lost := ledger.TaskID("s", "send-failed"), ledger.TaskID("s", "send-lost")
		plan := faultinject.NewPlan()
		plan.Add(failed, faultinject.Step{Service: "SQS", Operation: "SendMessage", Kind: faultinject.SendFailure})
		plan.Add(lost, faultinject.Step{Service: "SQS", Operation: "SendMessage", Kind: faultinject.LostReply})
		b := setup(t, e, plan)
		s := &dispatch.Sender{SQS: b.sqs, QueueURL: e.Names.TaskQueueURL}

		err := s.Send(ctx, failed, "", 0)
		var ie *faultinject.InjectedError
		if !errors.As(err, &ie) || ie.Kind != faultinject.SendFailure || ie.HTTPStatusCode() != 503 {
			t.Fatalf("failed send: err = %v, want an injected 503", err)
		}
		if err := s.Send(ctx, lost, "", 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lost send: err = %v, want a lost reply", err)
		}
		// Exactly one message is on the queue: the one whose reply was lost.
		got := map[string]int{}
		for range 5 {
			out, err := e.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl: aws.String(e.Names.TaskQueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				msg, err := dispatch.Parse(aws.ToString(m.Body))
				if err != nil {
					t.Fatal(err)
				}
				got[msg.TaskID]++
			}
			if len(got) > 0 {
				break
			}
		}
		if len(got) != 1 || got[lost] != 1 {
			t.Fatalf("messages on the queue by task: %v, want only %s once", got, lost)
		}
	})
}

func TestDisabled(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		id := ledger.TaskID("s", "off")
		b := setup(t, e, faultinject.ScheduleFunc(func(faultinject.Call) faultinject.Kind { return faultinject.Throttle }))
		b.inj.SetEnabled(false)
		if err := b.put(context.Background(), id); err != nil {
			t.Fatalf("put with injection off: %v", err)
		}
		if b.inj.Total(faultinject.Throttle) != 0 {
			t.Fatal("a fault was counted while injection was off")
		}
	})
}

func TestRatesAreSeededAndBounded(t *testing.T) {
	t.Parallel()
	rules, err := faultinject.ParseRules("DynamoDB.*:throttle=0.25, SQS.SendMessage:send_failure=1")
	if err != nil {
		t.Fatal(err)
	}
	r := faultinject.Rates{Seed: 7, Rules: rules}
	hits := 0
	const n = 4000
	for i := range n {
		c := faultinject.Call{Service: "DynamoDB", Operation: "UpdateItem", TaskID: "t_" + strconv.Itoa(i), N: 1}
		k := r.Decide(c)
		if k != r.Decide(c) {
			t.Fatal("the same call drew differently")
		}
		if k == faultinject.Throttle {
			hits++
		}
	}
	if hits < n/5 || hits > n*3/10 {
		t.Errorf("rate 0.25 hit %d of %d calls", hits, n)
	}
	if k := r.Decide(faultinject.Call{Service: "SQS", Operation: "SendMessage", TaskID: "t_x", N: 3}); k != faultinject.SendFailure {
		t.Errorf("rate 1 gave %q", k)
	}
	if k := r.Decide(faultinject.Call{Service: "SQS", Operation: "ReceiveMessage"}); k != "" {
		t.Errorf("an unmatched call gave %q", k)
	}
	other := faultinject.Rates{Seed: 8, Rules: rules}
	same := 0
	for i := range 200 {
		c := faultinject.Call{Service: "DynamoDB", Operation: "PutItem", TaskID: "t_" + strconv.Itoa(i), N: 1}
		if r.Decide(c) == other.Decide(c) {
			same++
		}
	}
	if same == 200 {
		t.Error("two seeds drew the same schedule")
	}
	for _, bad := range []string{"DynamoDB.PutItem", "x:explode=0.1", "x:throttle=2"} {
		if _, err := faultinject.ParseRules(bad); err == nil {
			t.Errorf("ParseRules(%q) accepted", bad)
		}
	}
}

func TestTaskIDOf(t *testing.T) {
	t.Parallel()
	id := ledger.TaskID("s", "k")
	key := map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}}
	body := `{"task_id":"` + id + `"}`
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"put", &dynamodb.PutItemInput{Item: key}, id},
		{"update", &dynamodb.UpdateItemInput{Key: key}, id},
		{"get", &dynamodb.GetItemInput{Key: key}, id},
		{"transact", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{Item: key}}}}, id},
		{"send", &sqs.SendMessageInput{MessageBody: &body}, id},
		{"poison", &sqs.SendMessageInput{MessageBody: aws.String("not json")}, ""},
		{"query", &dynamodb.QueryInput{}, ""},
	}
	for _, c := range cases {
		if got := faultinject.TaskIDOf(c.in); got != c.want {
			t.Errorf("%s: TaskIDOf = %q, want %q", c.name, got, c.want)
		}
	}
}
