package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/testenv"
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

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	s, err := local.Start(ctx, local.Options{
		Addr:           "127.0.0.1:0",
		ReconcileEvery: 500 * time.Millisecond,
		StatusEvery:    -1,
		Prefix:         testenv.UniquePrefix(),
	})
	if err != nil {
		t.Fatalf("local.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stack Close: %v", err)
		}
	})
	shots := os.Getenv("TASKLEDGER_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join("test", "screenshots")
	}
	if shots, err = filepath.Abs(shots); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, filepath.Join("test", "documents.mjs"), s.URL, shots)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	t.Logf("documents.mjs stderr:\n%s", stderr.String())

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var rep approvalReport // report plus the hashes the script computed
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("documents.mjs printed no JSON report (%v); stdout:\n%s", err, clip(stdout.String(), 4000))
	}
	for _, st := range rep.Steps {
		t.Logf("step %-80q ok=%t %5dms %s", st.Name, st.OK, st.MS, clip(string(st.Detail), 600))
	}
	if runErr != nil || !rep.OK {
		t.Fatalf("documents browser test failed (exit: %v, ok=%t)", runErr, rep.OK)
	}
	if len(rep.Screenshots) < 5 {
		t.Fatalf("screenshots: %v, want 5", rep.Screenshots)
	}
	for _, p := range rep.Screenshots {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10_000 {
			t.Errorf("screenshot %s: not a plausible PNG (%d bytes)", p, len(b))
		}
	}
	t.Logf("screenshots: %s", strings.Join(rep.Screenshots, " "))

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
