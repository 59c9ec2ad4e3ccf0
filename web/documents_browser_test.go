package web_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// TestBrowserDocuments drives the page's document attachments in headless
// Chromium on a local stack (web/test/documents.mjs: refused types and
// sizes before any request, a .txt and a .png hashed, declared, uploaded
// and submitted, the result naming them, an altered upload refused with
// upload-mismatch) and then checks in the ledger that the task references
// exactly the bytes the test built, and that the refused submit recorded
// nothing. Screenshots: documents-*.png in the screenshot dir
// (TASKLEDGER_SCREENSHOTS, default web/test/screenshots).
func TestBrowserDocuments(t *testing.T) {
	t.Parallel()
	node := needBrowser(t)
	ctx := browserCtx(t)
	s := startStack(ctx, t, local.Options{})

	var rep approvalReport // report plus the hashes the script computed
	runScript(ctx, t, node, "documents.mjs", &rep, s.URL, shotDir(t))
	checkScreenshots(t, rep.Screenshots, 5)

	// The task the page submitted references the two files, in order, by
	// the SHA-256 of the bytes the test built.
	id := rep.Tasks["withDocuments"]
	task, err := s.Ledger.Get(ctx, id)
	if err != nil {
		t.Fatalf("task %q: %v", id, err)
	}
	if task.State != ledger.StateCompleted {
		t.Errorf("task %s: state %s, want completed", id, task.State)
	}
	want := []struct{ name, contentType string }{{"minutes.txt", "text/plain"}, {"chart.png", "image/png"}}
	if len(task.Documents) != len(want) {
		t.Fatalf("task %s references %d documents, want %d", id, len(task.Documents), len(want))
	}
	for i, w := range want {
		d := task.Documents[i]
		if d.Ref.SHA256 != rep.Hashes[w.name] || d.ContentType != w.contentType || rep.Hashes[w.name] == "" {
			t.Errorf("document %d: sha256 %s, type %s; want %s (%s), %s", i, d.Ref.SHA256, d.ContentType, rep.Hashes[w.name], w.name, w.contentType)
		}
	}
	// One task in all: the injected 503 and its retry made one, the
	// upload-mismatch submit none.
	out, err := s.DDB.Scan(ctx, &dynamodb.ScanInput{TableName: &s.Names.TasksTable, Select: types.SelectCount, ConsistentRead: ptr(true)})
	if err != nil {
		t.Fatalf("scan tasks: %v", err)
	}
	if out.Count != 1 {
		t.Errorf("tasks table holds %d tasks, want 1", out.Count)
	}
}
