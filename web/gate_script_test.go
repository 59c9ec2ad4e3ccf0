package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A script that leaves a process behind holding its stdout (a browser or
// helper it spawned) cannot hold its test past the script's end or its
// context by more than the harness's WaitDelay: the test goes on and says
// why, instead of waiting out the orphan or go test's -timeout.
func TestScriptWhoseOrphanHoldsItsStdoutEndsWithinWaitDelay(t *testing.T) {
	t.Parallel()
	node := needNode(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "orphan.pid")
	src := `import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
const c = spawn('sleep', ['60'], { detached: true, stdio: ['ignore', 'inherit', 'ignore'] });
writeFileSync(process.argv[2], String(c.pid));
c.unref();
process.stdout.write(JSON.stringify({ ok: true, steps: [] }) + '\n');
`
	script := filepath.Join(dir, "orphan.mjs")
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	test, err := filepath.Abs("test")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(test, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	type result struct {
		stdout []byte
		err    error
	}
	done := make(chan result, 1)
	began := time.Now()
	go func() {
		out, _, err := execGatedScript(context.Background(), t, node, rel, nil, pidFile)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		t.Logf("ended after %v: %v; stdout %q", time.Since(began).Round(time.Millisecond), r.err, r.stdout)
		if !strings.Contains(string(r.stdout), `"ok":true`) {
			t.Errorf("the script's report was lost: stdout %q", r.stdout)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the script ended, but its test still waits on its stdout 25 s on (WaitDelay is 10 s)")
	}
}
