//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/local"
)

// lines collects a process's output and reports when a line matches.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.all = append(l.all, s); l.mu.Unlock() }

func (l *lines) find(re *regexp.Regexp) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		if m := re.FindStringSubmatch(s); m != nil {
			return m
		}
	}
	return nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The binary comes up, prints where it is, completes a task submitted with
// plain HTTP, and exits 0 on SIGINT (Ctrl-C) without leaving a process.
func TestBinaryRunsAndStopsOnInterrupt(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "taskledger-local")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ADDR=127.0.0.1:0", "AWS_ENDPOINT_URL=", "LOG_LEVEL=error", "TASKLEDGER_PREFIX=cmdtest")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := &lines{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.add(sc.Text())
		}
	}()
	exited := make(chan error, 1)
	go func() { <-copied; exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	})

	page := regexp.MustCompile(`^\s+page\s+(http://127\.0\.0\.1:\d+)/$`)
	// The banner follows the example destination's build (go build of
	// aws-lambda-rie and a function): on a fresh clone beside the rest of
	// the suite on two cores that alone has taken over a minute.
	eventually(t, 3*time.Minute, "the banner", func() bool { return out.find(page) != nil })
	base := out.find(page)[1]
	for _, want := range []string{"emulator    http://127.0.0.1:", "tables      cmdtest-TasksTable, cmdtest-ReviewTable, cmdtest-WatchTable (watch)", "curl -si -X POST " + base + "/tasks"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q", want)
		}
	}

	req, _ := http.NewRequest(http.MethodPost, base+"/tasks", strings.NewReader(`{"kind":"generate","input":{"prompt":"Say hello"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "cmd-test-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /tasks: %v", err)
	}
	var v struct {
		TaskID string `json:"task_id"`
		State  string `json:"state"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || v.TaskID == "" {
		t.Fatalf("POST /tasks = %d %+v", resp.StatusCode, v)
	}
	eventually(t, 20*time.Second, "the task to complete", func() bool {
		r, err := http.Get(base + "/tasks/" + v.TaskID)
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return strings.Contains(string(b), `"state":"completed"`)
	})
	eventually(t, 10*time.Second, "the batch progress line", func() bool {
		return out.find(regexp.MustCompile(`worker: batch of 1 → 1 completed`)) != nil
	})

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGINT: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGINT")
	}
	if !strings.Contains(out.String(), "taskledger-local: stopped") {
		t.Errorf("no clean-stop line")
	}
	// Nothing of the process group is left.
	if err := syscall.Kill(-cmd.Process.Pid, 0); err == nil {
		t.Errorf("processes of group %d still exist after exit", cmd.Process.Pid)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Errorf("%s still answers after exit", base)
	}
}

func TestOIDCOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{}, ""},
		{map[string]string{"TASKLEDGER_OIDC_ISSUER": "https://idp.example", "TASKLEDGER_OIDC_AUDIENCE": "c1"}, ""},
		{map[string]string{"TASKLEDGER_OIDC_ISSUER": "https://idp.example"}, "TASKLEDGER_OIDC_AUDIENCE is empty"},
		{map[string]string{"TASKLEDGER_OIDC_AUDIENCE": "c1"}, "need TASKLEDGER_OIDC_ISSUER"},
		{map[string]string{"TASKLEDGER_OIDC_ISSUER": "idp.example", "TASKLEDGER_OIDC_AUDIENCE": "c1"}, "want the issuer's http(s) URL"},
	} {
		o := local.Options{
			OIDCIssuer:   tc.env["TASKLEDGER_OIDC_ISSUER"],
			OIDCAudience: api.ParseOrigins(tc.env["TASKLEDGER_OIDC_AUDIENCE"]),
		}
		err := oidcOptions(o)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.wantErr)
		}
	}
}

// make run reads the approver policy as the deployed submit function does
// (APPROVER_CLAIM, APPROVER_CLAIM_VALUE, ALLOW_SELF_APPROVAL), and refuses
// to start on a setting the function would refuse.
func TestApproverPolicyOptions(t *testing.T) {
	t.Setenv("TASKLEDGER_OIDC_ISSUER", "https://idp.example")
	t.Setenv("TASKLEDGER_OIDC_AUDIENCE", "c1")
	t.Setenv("APPROVER_CLAIM", "groups")
	t.Setenv("APPROVER_CLAIM_VALUE", "approvers")
	t.Setenv("ALLOW_SELF_APPROVAL", "false")
	o, err := options()
	if want := (api.ApprovalPolicy{Claim: "groups", Value: "approvers", NoSelfApproval: true}); err != nil || o.Approvals != want {
		t.Fatalf("options() = %+v, %v; want Approvals %+v", o.Approvals, err, want)
	}
	t.Setenv("APPROVER_CLAIM_VALUE", "approvers (pending)")
	if _, err := options(); err == nil || !strings.Contains(err.Error(), "APPROVER_CLAIM_VALUE") {
		t.Errorf("APPROVER_CLAIM_VALUE with a space: %v, want it refused naming the setting", err)
	}
	t.Setenv("APPROVER_CLAIM_VALUE", "")
	t.Setenv("APPROVER_CLAIM", "")
	if _, err := options(); err == nil || !strings.Contains(err.Error(), "ALLOW_SELF_APPROVAL") {
		t.Errorf("ALLOW_SELF_APPROVAL=false without a claim: %v, want it refused naming the setting", err)
	}
}

// make run takes the per-caller daily token quota as the deployed
// functions do (SPEND_DAILY_QUOTA_TOKENS).
func TestDailyQuotaOption(t *testing.T) {
	t.Setenv("SPEND_DAILY_QUOTA_TOKENS", "2000000")
	if o, err := options(); err != nil || o.DailyQuotaTokens != "2000000" {
		t.Fatalf("options() DailyQuotaTokens = %q, %v; want 2000000", o.DailyQuotaTokens, err)
	}
}

// make run sends notifications out of the box: the email destination with
// a local sender and allow-list, and approvers and signed-in requesters
// notified through it; TASKLEDGER_NOTIFICATIONS="" turns them off.
func TestMakeRunNotifiesByEmailByDefault(t *testing.T) {
	t.Setenv("TASKLEDGER_DESTINATIONS", "")
	t.Setenv("TASKLEDGER_NOTIFICATIONS", "")
	os.Unsetenv("TASKLEDGER_NOTIFICATIONS")
	o, err := options()
	if err != nil {
		t.Fatal(err)
	}
	if o.Destinations.Email == nil || o.Destinations.Email.From == "" || len(o.Destinations.Email.AllowedRecipients) == 0 {
		t.Fatalf("email destination %+v, want a local sender and allow-list", o.Destinations.Email)
	}
	if !strings.Contains(o.Notify, `"approvers":{"email":["approver@example.com"]}`) || !strings.Contains(o.Notify, `"requester":{"email":true,"anonymous_email":"requester@example.com"}`) {
		t.Fatalf("notifications %q, want approvers and requesters by email", o.Notify)
	}
	t.Setenv("TASKLEDGER_NOTIFICATIONS", "")
	if o, err = options(); err != nil || o.Notify != "" {
		t.Fatalf("TASKLEDGER_NOTIFICATIONS=\"\": %q, %v; want none", o.Notify, err)
	}
}
