//go:build linux

package rietest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/testenv"
)

// The Runtime Interface Emulator, pinned.
const (
	rieModule  = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
	rieVersion = "v0.0.0-20261030222936-bef5c4ba774d"
)

// functions maps the template's logical ids to their directories under
// functions/.
var functions = map[string]string{
	"SubmitFunction":     "submit",
	"WorkerFunction":     "worker",
	"ReconcilerFunction": "reconciler",
}

func TestMain(m *testing.M) { testenv.Main(m) }

// unavailable skips (locally) or fails (TASKLEDGER_REQUIRE_RIE=1) when RIE
// cannot be had.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv("TASKLEDGER_REQUIRE_RIE") == "1" {
		t.Fatalf("rietest: aws-lambda-rie is required (TASKLEDGER_REQUIRE_RIE=1) but unavailable: %s", reason)
	}
	t.Skipf("rietest: skipped, aws-lambda-rie unavailable: %s (set TASKLEDGER_REQUIRE_RIE=1 to fail instead)", reason)
}

func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	t.Fatalf("rietest: no go command on PATH")
	return ""
}

// installRIE returns the path of aws-lambda-rie: $TASKLEDGER_RIE, or one
// built from the module proxy into gobin. An error means RIE is
// unavailable (see unavailable).
func installRIE(goTool, gobin string) (string, error) {
	if p := os.Getenv("TASKLEDGER_RIE"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("TASKLEDGER_RIE=%s: %v", p, err)
		}
		return p, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "install", rieModule+"@"+rieVersion)
	cmd.Dir = gobin // outside the module: go.mod is neither consulted nor changed
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", rieModule, rieVersion, err, tail(out, 2000))
	}
	return filepath.Join(gobin, "aws-lambda-rie"), nil
}

// buildBootstraps builds functions/<dir> into <tmp>/<dir>/bootstrap as
// `make build` does, for the host architecture. One go build builds all
// three (one process: it shares the work and never races another build on
// a cold cache).
func buildBootstraps(goTool, root, out string) (map[string]string, error) {
	build := filepath.Join(out, "build")
	args := []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", build + string(filepath.Separator)}
	for _, dir := range functions {
		args = append(args, "./functions/"+dir)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	paths := map[string]string{}
	for _, dir := range functions {
		bin := filepath.Join(out, dir, "bootstrap")
		if err := os.Mkdir(filepath.Dir(bin), 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(filepath.Join(build, dir), bin); err != nil {
			return nil, err
		}
		paths[dir] = bin
	}
	return paths, nil
}

// functionEnv is the environment template.yaml gives a function for the
// parameter values in vals, with refs resolving the resources (the local
// tables, queues and the task id key secret).
func functionEnv(t *testing.T, fn stack.Function, vals *stack.Values, refs map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for k, v := range fn.Env {
		r, err := vals.Eval(v, refs)
		if err != nil {
			t.Fatalf("%s environment %s: %v", fn.LogicalID, k, err)
		}
		s, ok := r.(string)
		if ok && strings.HasPrefix(s, "sub:") {
			s = substitute(strings.TrimPrefix(s, "sub:"), refs)
		}
		if !ok || strings.HasPrefix(s, "ref:") || strings.HasPrefix(s, "getatt:") || strings.Contains(s, "${") {
			t.Fatalf("%s environment %s = %v: unresolved (teach functionEnv's refs)", fn.LogicalID, k, r)
		}
		env[k] = s
	}
	return env
}

// substitute resolves a Fn::Sub string's ${Name} from refs and the pseudo
// parameters of a us-east-1 deployment; a name it cannot resolve is left
// as it is (and refused by functionEnv).
func substitute(s string, refs map[string]string) string {
	pseudo := map[string]string{"AWS::Region": "us-east-1", "AWS::URLSuffix": "amazonaws.com", "AWS::Partition": "aws"}
	return subName.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := refs[name]; ok {
			return v
		}
		if v, ok := pseudo[name]; ok {
			return v
		}
		return m
	})
}

var subName = regexp.MustCompile(`\$\{[A-Za-z0-9:.]+\}`)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// rieFunction is one bootstrap running under RIE.
type rieFunction struct {
	name   string
	invoke string // the invocation URL
	out    *testenv.Buffer
}

// startRIE runs bootstrap under aws-lambda-rie on free loopback ports with
// exactly env (plus what RIE adds), and stops the process group at cleanup.
func startRIE(t *testing.T, rie, bootstrap string, fn stack.Function, env map[string]string, endpoint string) *rieFunction {
	t.Helper()
	api, rapi := freePort(t), freePort(t)
	full := map[string]string{
		"AWS_ENDPOINT_URL":                endpoint,
		"AWS_REGION":                      "us-east-1",
		"AWS_ACCESS_KEY_ID":               "test",
		"AWS_SECRET_ACCESS_KEY":           "test",
		"AWS_EC2_METADATA_DISABLED":       "true",
		"AWS_LAMBDA_FUNCTION_NAME":        fn.LogicalID,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(fn.Timeout / time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(fn.MemorySize),
		"HOME":                            t.TempDir(), // no developer ~/.aws
	}
	for k, v := range env {
		full[k] = v
	}
	var envList []string
	for k, v := range full {
		envList = append(envList, k+"="+v)
	}
	out := &testenv.Buffer{}
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", fmt.Sprintf("127.0.0.1:%d", api),
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", rapi),
		"--log-level", "warn",
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = envList
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start aws-lambda-rie: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("%s under RIE, output:\n%s", fn.LogicalID, tail([]byte(out.String()), 6000))
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", api)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("aws-lambda-rie for %s exited at start:\n%s", fn.LogicalID, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("aws-lambda-rie for %s did not listen on %s within 15s:\n%s", fn.LogicalID, addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &rieFunction{name: fn.LogicalID, invoke: "http://" + addr + "/2015-03-31/functions/function/invocations", out: out}
}

// call invokes the function with payload through RIE.
func (f *rieFunction) call(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.invoke, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("RIE answered %d: %s", resp.StatusCode, body)
	}
	return body, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	p, err := stack.Find()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(p)
}

func readEvent(t *testing.T, root, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "events", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("events/%s: %v", name, err)
	}
	return ev
}
