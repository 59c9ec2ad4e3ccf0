package soak

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The document rules can fail: a small soak with both document kinds
// twice, then each rule's promise is broken before the check (the stored
// reference, the result, the item's size, the answers the callers saw)
// and every one must show up as its violation.
func TestCheckerCatchesBrokenDocumentPromises(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, "kumo")
	var tampered []string
	cfg := Config{N: 2 * len(TaskKinds()), Seed: 11, FaultShare: 1, NoBackground: true, NoBacklog: true, SubmitRate: -1, Mode: ModePlainReadback}
	cfg.beforeCheck = func(ctx context.Context, s *soak) {
		tasks, err := s.scanTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byKind := map[Kind][]ledger.Task{}
		for _, tk := range tasks {
			if pt := s.byID[tk.TaskID]; pt != nil && isDocument(pt.kind) && tk.State == ledger.StateCompleted {
				byKind[pt.kind] = append(byKind[pt.kind], tk)
			}
		}
		docs, altered := byKind[Document], byKind[DocumentAltered]
		if len(docs) < 2 || len(altered) < 2 {
			t.Fatalf("the soak did not complete the document tasks to tamper with: %d document, %d document_altered", len(docs), len(altered))
		}
		for _, tk := range altered {
			if d := s.docs[tk.TaskID]; d == nil || !d.altered || !d.absentAfter {
				t.Fatalf("document_altered %s: the altered bytes were not submitted and refused (%+v)", tk.TaskID, d)
			}
		}
		update := func(id, expr string, names map[string]string, v types.AttributeValue) {
			_, err := s.cleanDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(e.Names.TasksTable), Key: key(id), UpdateExpression: aws.String(expr),
				ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]types.AttributeValue{":v": v},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// The item names another document version.
		other := slices.Clone(docs[0].Documents)
		other[0].Ref.SHA256 = strings.Repeat("0", 64)
		av, err := attributevalue.Marshal(other)
		if err != nil {
			t.Fatal(err)
		}
		update(docs[0].TaskID, "SET #a = :v", map[string]string{"#a": "documents"}, av)
		tampered = append(tampered, "document_not_referenced")
		// A result that never read the document (not the provider's either).
		update(docs[1].TaskID, "SET #a = :v", map[string]string{"#a": "result"}, &types.AttributeValueMemberS{Value: `{"text":"read nothing"}`})
		tampered = append(tampered, "document_not_read", "result_not_the_providers")
		// The bytes carried in the item.
		update(altered[0].TaskID, "SET #a = :v", map[string]string{"#a": "document_bytes"}, &types.AttributeValueMemberS{Value: string(s.docs[altered[0].TaskID].doc)})
		tampered = append(tampered, "document_item_large")
		// The callers' answers: a replay that was a new task, another
		// version accepted, altered bytes accepted, and a task that existed
		// after the refusal.
		s.records[docs[0].TaskID].finals["dup"] = call{variant: "dup", status: 202, taskID: docs[0].TaskID}
		tampered = append(tampered, "document_replay_not_same_task")
		s.records[docs[1].TaskID].finals["b"] = call{variant: "b", status: 200, taskID: docs[1].TaskID, replayed: true}
		tampered = append(tampered, "document_version_not_rejected")
		s.records[altered[0].TaskID].finals["altered"] = call{variant: "altered", status: 202, taskID: altered[0].TaskID}
		tampered = append(tampered, "altered_upload_not_rejected")
		s.docs[altered[1].TaskID].absentAfter = false
		tampered = append(tampered, "altered_upload_wrote")
	}
	HoldSoakSlot(t)
	rep, err := Run(context.Background(), &Env{Backend: e.Backend, AWS: e.AWS, Names: e.Names}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, v := range rep.Violations {
		if isDocument(v.Kind) {
			rules = append(rules, v.Rule)
		}
	}
	for _, want := range tampered {
		if !slices.Contains(rules, want) {
			t.Errorf("tampering %q went unnoticed; document violations: %v", want, rules)
		}
	}
	if len(rules) != len(tampered) {
		t.Errorf("document violations %v, want exactly the tampered rules %v", rules, tampered)
	}
}
