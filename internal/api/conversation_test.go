package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// convBody is a generate submit whose input is a conversation.
func convBody(conversationID string, msgs ...string) string {
	var list []map[string]string
	for i := 0; i+1 < len(msgs); i += 2 {
		list = append(list, map[string]string{"role": msgs[i], "content": msgs[i+1]})
	}
	in := map[string]any{"messages": list}
	if conversationID != "" {
		in["conversation_id"] = conversationID
	}
	b, _ := json.Marshal(map[string]any{"kind": "generate", "input": in})
	return string(b)
}

func convReq(id string, query url.Values, opts ...reqOpt) events.APIGatewayV2HTTPRequest {
	r := newReq(http.MethodGet, "/conversations/{id}", "/conversations/"+id, id, "", opts...)
	if len(query) > 0 {
		r.QueryStringParameters = map[string]string{}
		for k := range query {
			r.QueryStringParameters[k] = query.Get(k)
		}
		r.RawQueryString = query.Encode()
	}
	return r
}

func conversation(t *testing.T, resp events.APIGatewayV2HTTPResponse) api.ConversationView {
	t.Helper()
	wantStatus(t, resp, http.StatusOK)
	var v api.ConversationView
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		t.Fatalf("conversation %q: %v", resp.Body, err)
	}
	return v
}

// steppingLedger gives the handler a ledger whose clock moves 1 ms per
// reading, so tasks created one after another have distinct, ordered
// created_ms (the index's sort key) however fast the engine answers.
func steppingLedger(t *testing.T, e *testenv.Env) func(*api.Handler) {
	var ms atomic.Int64
	ms.Store(time.Now().UnixMilli())
	l, err := ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable,
		Now: func() time.Time { return time.UnixMilli(ms.Add(1)) }})
	if err != nil {
		t.Fatal(err)
	}
	return func(h *api.Handler) { h.Ledger = l }
}

// awaitConversation reads the conversation until it lists want tasks: the
// index is eventually consistent on AWS (the emulators answer at once).
func awaitConversation(t *testing.T, b *bundle, id string, want int, opts ...reqOpt) api.ConversationView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := conversation(t, b.do(t, convReq(id, nil, opts...)))
		if len(v.Tasks) == want || time.Now().After(deadline) {
			return v
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSameKeyWithAnotherConversationStateIsRejected(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		first := convBody("chat-1", "system", "be brief", "user", "What are the key decisions?")
		created := b.do(t, submitReq("send-1", first))
		wantStatus(t, created, http.StatusAccepted)
		v := view(t, created)
		if v.ConversationID != "chat-1" {
			t.Fatalf("view conversation_id = %q, want chat-1", v.ConversationID)
		}

		// The browser retries the same press of Send: the same task.
		replay := b.do(t, submitReq("send-1", first))
		wantStatus(t, replay, http.StatusOK)
		if replay.Headers[api.HeaderIdempotentReplayed] != "true" || view(t, replay).TaskID != v.TaskID {
			t.Fatalf("replay = %d %v %s, want the same task %s", replay.StatusCode, replay.Headers, replay.Body, v.TaskID)
		}

		// The same key bound to another conversation state: 422, nothing written.
		for name, other := range map[string]string{
			"another turn":         convBody("chat-1", "system", "be brief", "user", "What are the key decisions?", "assistant", "A and B.", "user", "Why?"),
			"another conversation": convBody("chat-2", "system", "be brief", "user", "What are the key decisions?"),
			"no conversation":      convBody("", "system", "be brief", "user", "What are the key decisions?"),
			"another system text":  convBody("chat-1", "system", "be verbose", "user", "What are the key decisions?"),
		} {
			wantProblem(t, b.do(t, submitReq("send-1", other)), http.StatusUnprocessableEntity, api.TypeIdempotencyKeyReused)
			if n := len(scanTasks(t, e)); n != 1 {
				t.Fatalf("%s: %d tasks after the 422, want 1", name, n)
			}
		}
		got, err := b.l.Get(context.Background(), v.TaskID)
		if err != nil || got.ConversationID != "chat-1" || got.PayloadSHA256 != v.Receipt.PayloadSHA256 {
			t.Fatalf("task after the 422s = %+v, %v", got, err)
		}
	})
}

func TestConversationInputRefusalsNameTheProblemAndWriteNothing(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		many := make([]string, 0, 2*65)
		for range 65 {
			many = append(many, "user", "again")
		}
		cases := []struct{ name, body, typ, field string }{
			{"neither prompt nor messages", `{"kind":"generate","input":{"conversation_id":"c"}}`, api.TypeInputEmpty, "input.prompt"},
			{"unknown role", convBody("c", "tool", "x"), api.TypeInvalidMessage, "input.messages[0].role"},
			{"empty content", convBody("c", "user", ""), api.TypeInvalidMessage, "input.messages[0].content"},
			{"last turn is the assistant's", convBody("c", "user", "q", "assistant", "a"), api.TypeInvalidMessage, "input.messages[1].role"},
			{"too many messages", convBody("c", many...), api.TypeTooManyMessages, "input.messages"},
			{"message too large", convBody("c", "user", strings.Repeat("x", 16<<10+1)), api.TypeMessageTooLarge, "input.messages[0].content"},
			{"conversation id outside the charset", convBody("a/../b", "user", "q"), api.TypeInvalidConversationID, "input.conversation_id"},
			{"conversation id too long", convBody(strings.Repeat("c", 129), "user", "q"), api.TypeInvalidConversationID, "input.conversation_id"},
		}
		for i, tc := range cases {
			p := wantProblem(t, b.do(t, submitReq("bad-"+strconv.Itoa(i), tc.body)), http.StatusBadRequest, tc.typ)
			if p.Field != tc.field {
				t.Errorf("%s: field = %q, want %q (%s)", tc.name, p.Field, tc.field, p.Detail)
			}
		}
		// Many messages within their count still meet the input cap (413).
		long := make([]string, 0, 2*20)
		for range 20 {
			long = append(long, "user", strings.Repeat("y", 2000))
		}
		wantProblem(t, b.do(t, submitReq("too-long", convBody("c", long...))), http.StatusRequestEntityTooLarge, api.TypeInputTooLarge)
		if n := len(scanTasks(t, e)); n != 0 {
			t.Fatalf("%d tasks after refusals, want 0", n)
		}
	})
}

func TestConversationListsTheCallersTasksOldestFirst(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withHandler(steppingLedger(t, e)))
		alice, bob := asJWT("alice"), asJWT("bob")
		var ids []string
		for i, q := range []string{"first question", "second question", "third question"} {
			resp := b.do(t, submitReq("a-"+strconv.Itoa(i), convBody("shared-id", "user", q), alice))
			wantStatus(t, resp, http.StatusAccepted)
			ids = append(ids, view(t, resp).TaskID)
		}
		// Bob uses the same conversation id: his own conversation.
		bobResp := b.do(t, submitReq("b-0", convBody("shared-id", "user", "bob's secret question"), bob))
		wantStatus(t, bobResp, http.StatusAccepted)
		// A task of alice's outside the conversation.
		wantStatus(t, b.do(t, submitReq("a-plain", body("not in a conversation"), alice)), http.StatusAccepted)

		// A regenerate is a new task in the same conversation.
		regen := b.do(t, regenReq(ids[1], "a-regen", "", alice))
		wantStatus(t, regen, http.StatusAccepted)
		rv := view(t, regen)
		if rv.ConversationID != "shared-id" || rv.ParentTaskID != ids[1] {
			t.Fatalf("regenerate view conversation %q parent %q, want shared-id and %s", rv.ConversationID, rv.ParentTaskID, ids[1])
		}
		ids = append(ids, rv.TaskID)

		// The first one completes; its result shows in the conversation.
		ctx := context.Background()
		claimed, err := b.h.Ledger.Claim(ctx, ids[0], ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		result := `{"text":"the answer","model":"m","usage":{"input_tokens":3,"output_tokens":2}}`
		if _, err := b.h.Ledger.Complete(ctx, ids[0], claimed.AssignmentVersion, ledger.Completion{Result: result, Provider: "simulated"}); err != nil {
			t.Fatal(err)
		}

		v := awaitConversation(t, b, "shared-id", 4, alice)
		if len(v.Tasks) != 4 {
			t.Fatalf("alice's conversation has %d tasks, want 4: %+v", len(v.Tasks), v.Tasks)
		}
		wantLast := []string{"first question", "second question", "third question", "second question"}
		for i, task := range v.Tasks {
			if task.TaskID != ids[i] || task.LastUserMessage != wantLast[i] {
				t.Fatalf("task %d = %s %q, want %s %q (oldest first)", i, task.TaskID, task.LastUserMessage, ids[i], wantLast[i])
			}
			if task.URL != "/tasks/"+ids[i] || task.Progress == nil {
				t.Fatalf("task %d url %q progress %v", i, task.URL, task.Progress)
			}
		}
		if v.Tasks[0].State != "completed" || string(v.Tasks[0].Result) != result {
			t.Fatalf("completed task in the conversation: state %s result %s", v.Tasks[0].State, v.Tasks[0].Result)
		}
		if v.Tasks[1].State != "queued" || v.Tasks[1].Result != nil {
			t.Fatalf("queued task in the conversation: state %s result %s", v.Tasks[1].State, v.Tasks[1].Result)
		}
		if v.NextCursor != "" {
			t.Fatalf("one page holds it all, yet next_cursor = %q", v.NextCursor)
		}

		// Bob sees only his own task under the same id; nobody else sees any.
		bv := awaitConversation(t, b, "shared-id", 1, bob)
		if len(bv.Tasks) != 1 || bv.Tasks[0].TaskID != view(t, bobResp).TaskID {
			t.Fatalf("bob's conversation = %+v", bv.Tasks)
		}
		for _, tk := range bv.Tasks {
			for _, id := range ids {
				if tk.TaskID == id {
					t.Fatalf("bob's conversation shows alice's task %s", id)
				}
			}
		}
		cv := conversation(t, b.do(t, convReq("shared-id", nil, asJWT("carol"))))
		if len(cv.Tasks) != 0 {
			t.Fatalf("carol's view of the id = %+v", cv)
		}

		// Pages of two, with the cursor, give the same order.
		var paged []string
		q := url.Values{"limit": {"2"}}
		for range 4 {
			pv := conversation(t, b.do(t, convReq("shared-id", q, alice)))
			for _, tk := range pv.Tasks {
				paged = append(paged, tk.TaskID)
			}
			if pv.NextCursor == "" {
				break
			}
			q = url.Values{"limit": {"2"}, "cursor": {pv.NextCursor}}
		}
		if strings.Join(paged, ",") != strings.Join(ids, ",") {
			t.Fatalf("paged = %v, want %v", paged, ids)
		}

		wantProblem(t, b.do(t, convReq("shared-id", url.Values{"limit": {"51"}}, alice)), http.StatusBadRequest, api.TypeInvalidQuery)
		wantProblem(t, b.do(t, convReq("shared-id", url.Values{"cursor": {"not-a-cursor"}}, alice)), http.StatusBadRequest, api.TypeInvalidQuery)
		wantProblem(t, b.do(t, convReq("bad.id", nil, alice)), http.StatusBadRequest, api.TypeInvalidConversationID)
	})
}

func TestRegenerateStaysInItsParentsConversation(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		parent := view(t, b.do(t, submitReq("p", convBody("c-1", "user", "q"))))
		for name, in := range map[string]string{
			"another conversation": `{"input":{"messages":[{"role":"user","content":"q2"}],"conversation_id":"c-2"}}`,
			"no conversation":      `{"input":{"messages":[{"role":"user","content":"q2"}]}}`,
		} {
			p := wantProblem(t, b.do(t, regenReq(parent.TaskID, "r-"+strings.ReplaceAll(name, " ", "-"), in)), http.StatusBadRequest, api.TypeInvalidConversationID)
			if p.Field != "input.conversation_id" {
				t.Fatalf("%s: field %q", name, p.Field)
			}
		}
		same := b.do(t, regenReq(parent.TaskID, "r-same", `{"input":{"messages":[{"role":"user","content":"q2"}],"conversation_id":"c-1"}}`))
		wantStatus(t, same, http.StatusAccepted)
		if v := view(t, same); v.ConversationID != "c-1" {
			t.Fatalf("regenerate with a new input: conversation %q", v.ConversationID)
		}
		if n := len(scanTasks(t, e)); n != 2 {
			t.Fatalf("%d tasks, want the parent and one regenerate", n)
		}
	})
}

func TestLargeConversationGoesToThePayloadBucket(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withPayloads(e.Payloads(t, 0)))
		history := make([]string, 0, 12)
		for i := range 5 {
			history = append(history, "user", "question "+strconv.Itoa(i)+" "+strings.Repeat("q", 1500), "assistant", strings.Repeat("a", 1500))
		}
		history = append(history, "user", "the last question")
		resp := b.do(t, submitReq("big", convBody("big-chat", history...)))
		wantStatus(t, resp, http.StatusAccepted)
		id := view(t, resp).TaskID
		tasks := scanTasks(t, e)
		if len(tasks) != 1 || tasks[0].InputRef == nil || tasks[0].Input != "" {
			t.Fatalf("item input %d bytes, ref %+v: a conversation over the inline limit must be in S3", len(tasks[0].Input), tasks[0].InputRef)
		}
		if tasks[0].ConversationID != "big-chat" {
			t.Fatalf("item conversation_id = %q", tasks[0].ConversationID)
		}
		v := awaitConversation(t, b, "big-chat", 1)
		if len(v.Tasks) != 1 || v.Tasks[0].TaskID != id || v.Tasks[0].LastUserMessage != "the last question" {
			t.Fatalf("conversation = %+v", v.Tasks)
		}
	})
}
