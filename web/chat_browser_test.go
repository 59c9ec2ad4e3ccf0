package web_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// chatReport is web/test/chat.mjs's report: the conversation id beside
// the tasks it names.
type chatReport struct {
	report
	Conversation string `json:"conversation"`
}

// TestChatBrowser holds a conversation on the Chat tab in headless
// Chromium (web/test/chat.mjs), the test's stream gate holding replies
// where the script needs them: three turns whose replies grow while they
// run and end as the saved result, the conversation read back after a
// reload, a Regenerate, a Stop during a reply, and a re-press of Send after
// the automatic retries gave up that gets the same task back, and a reply
// followed by polling its progress when the stream refuses; a document
// attached to the conversation is read with the next message. The ledger
// then holds exactly those tasks, in that one conversation.
func TestChatBrowser(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	gate := newStreamGate()
	s := startStack(ctx, t, local.Options{
		Provider:   provider.Config{SimulatedStreamDelay: 20 * time.Millisecond, SimulatedStreamGate: gate.wait},
		StreamPoll: 100 * time.Millisecond,
		// A short lease makes the worker renew, and so see a Stop and cut
		// the held reply, every 2 s.
		Lease: 6 * time.Second,
	})
	var rep chatReport
	runGatedScript(ctx, t, node, "chat.mjs", gate, &rep, s.URL, shotDir(t))
	checkScreenshots(t, rep.Screenshots, 4)
	if rep.Conversation == "" {
		t.Fatalf("report names no conversation: %+v", rep.Tasks)
	}

	want := map[string]ledger.State{
		"turn1":        ledger.StateCompleted,
		"turn2":        ledger.StateCompleted,
		"turn3":        ledger.StateCompleted,
		"regenerated":  ledger.StateCompleted,
		"stopped":      ledger.StateCancelled,
		"repressed":    ledger.StateCompleted,
		"polled":       ledger.StateCompleted,
		"withDocument": ledger.StateCompleted,
	}
	for name, state := range want {
		id := rep.Tasks[name]
		if id == "" {
			t.Fatalf("report names no %q task: %v", name, rep.Tasks)
		}
		task, err := s.Ledger.Get(ctx, id)
		if err != nil {
			t.Fatalf("%s task %s: %v", name, id, err)
		}
		if task.State != state {
			t.Errorf("%s task %s: state %s, want %s", name, id, task.State, state)
		}
		if task.ConversationID != rep.Conversation {
			t.Errorf("%s task %s: conversation %q, want %q", name, id, task.ConversationID, rep.Conversation)
		}
	}
	if task, err := s.Ledger.Get(ctx, rep.Tasks["regenerated"]); err == nil && task.ParentTaskID != rep.Tasks["turn3"] {
		t.Errorf("regenerated task's parent = %q, want turn 3's task %q", task.ParentTaskID, rep.Tasks["turn3"])
	}
	// One task per logical request: the re-pressed turn made one task
	// however many sends it took, and the press refused before reaching
	// the API made none.
	out, err := s.DDB.Scan(ctx, &dynamodb.ScanInput{TableName: &s.Names.TasksTable, Select: types.SelectCount, ConsistentRead: ptr(true)})
	if err != nil {
		t.Fatalf("scan tasks: %v", err)
	}
	if out.Count != int32(len(want)) {
		t.Errorf("tasks table holds %d tasks, want %d (one per logical request)", out.Count, len(want))
	}
}

// TestChatLogic runs the node unit tests of static/chatlib.js (node only,
// no browser, no npm packages).
func TestChatLogic(t *testing.T) {
	t.Parallel()
	runNodeTests(t, "chatlib.test.mjs")
}
