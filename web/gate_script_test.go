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
	rel := writeScript(t, dir, "orphan.mjs", src)
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

// A gated script's gate lines set the gate, each answered "ok" before the
// script goes on, among stdout lines of any length, which are kept for its
// report. The script here speaks harness.mjs's streamGate protocol itself
// (harness.mjs needs playwright).
func TestGatedScriptLinesSetTheGateAndAreAnswered(t *testing.T) {
	t.Parallel()
	node := needNode(t)
	dir := t.TempDir()
	src := `import { createInterface } from 'node:readline';
const rl = createInterface({ input: process.stdin });
const waiting = [];
rl.on('line', (l) => { const w = waiting.shift(); if (w) w(l.trim()); });
async function allow(prompt, words) {
  const answer = new Promise((res) => waiting.push(res));
  process.stdout.write(JSON.stringify({ gate: { prompt, allow: words } }) + '\n');
  const got = await answer;
  if (got !== 'ok') throw new Error('stream gate: ' + got);
}
process.stdout.write('x'.repeat(200000) + '\n');
await allow('p', 2);
await allow('q', -1);
await allow('p', 4);
process.stdout.write(JSON.stringify({ ok: true, steps: [] }) + '\n');
process.exit(0);
`
	rel := writeScript(t, dir, "gated.mjs", src)
	gate := newStreamGate()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var rep report
	runGatedScript(ctx, t, node, rel, gate, &rep)
	if gate.allow["p"] != 4 || gate.allow["q"] != -1 {
		t.Fatalf("gate %v, want p 4 and q -1", gate.allow)
	}
	if !rep.OK {
		t.Fatal("report not read")
	}
}

// writeScript writes src to dir/name and returns its path relative to
// web/test, where runGatedScript looks for scripts.
func writeScript(t *testing.T, dir, name, src string) string {
	t.Helper()
	script := filepath.Join(dir, name)
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
	return rel
}
