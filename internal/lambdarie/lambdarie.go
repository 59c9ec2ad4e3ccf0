package lambdarie

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The Runtime Interface Emulator, pinned (as internal/rietest pins it).
const (
	Module  = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
	Version = "v0.0.0-20261030222936-bef5c4ba774d"
)

// FunctionName is the name RIE serves its one function under.
const FunctionName = "function"

// EnvRIE names a prebuilt aws-lambda-rie to use instead of building one.
const EnvRIE = "TASKLEDGER_RIE"

// Install returns the path of aws-lambda-rie: $TASKLEDGER_RIE, or one built
// with `go install Module@Version` into gobin. An error means RIE cannot be
// had (no go command, no module proxy); it says why.
func Install(ctx context.Context, gobin string) (string, error) {
	if p := os.Getenv(EnvRIE); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvRIE, p, err)
		}
		return p, nil
	}
	bin := filepath.Join(gobin, "aws-lambda-rie")
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("lambdarie: no go command on PATH to build aws-lambda-rie")
	}
	if err := os.MkdirAll(gobin, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goTool, "install", Module+"@"+Version)
	cmd.Dir = gobin // outside any module: no go.mod is consulted or changed
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("lambdarie: go install %s@%s: %v\n%s", Module, Version, err, tail(out, 2000))
	}
	return bin, nil
}

// Build builds the main package pkg (e.g. "./functions/exampledestination")
// of the module at root into out/bootstrap, as `make build` does, for the
// host's architecture.
func Build(ctx context.Context, root, pkg, out string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("lambdarie: no go command on PATH")
	}
	bin := filepath.Join(out, "bootstrap")
	cmd := exec.CommandContext(ctx, goTool, "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("lambdarie: go build %s: %v\n%s", pkg, err, tail(b, 2000))
	}
	return bin, nil
}

// Function describes the function RIE runs.
type Function struct {
	// Name is AWS_LAMBDA_FUNCTION_NAME (logs only).
	Name string
	// Timeout is the invocation timeout (default 30 s).
	Timeout time.Duration
	// MemoryMB is AWS_LAMBDA_FUNCTION_MEMORY_SIZE (default 128).
	MemoryMB int
	// Env is the function's environment, on top of region, static
	// credentials and the function settings above.
	Env map[string]string
}

// Process is a bootstrap running under RIE.
type Process struct {
	// URL is the Invoke API's base URL ("http://127.0.0.1:PORT"): an SDK
	// Lambda client's BaseEndpoint.
	URL string
	// InvokeURL is the function's invocation URL.
	InvokeURL string

	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

// Start runs bootstrap under rie with fn's settings, its output to out
// (nil: discarded), and waits until the invoke API listens (or ctx ends).
func Start(ctx context.Context, rie, bootstrap string, fn Function, out *os.File) (*Process, error) {
	api, err := freePort()
	if err != nil {
		return nil, err
	}
	rapi, err := freePort()
	if err != nil {
		return nil, err
	}
	if fn.Timeout <= 0 {
		fn.Timeout = 30 * time.Second
	}
	if fn.MemoryMB <= 0 {
		fn.MemoryMB = 128
	}
	if fn.Name == "" {
		fn.Name = "function"
	}
	env := map[string]string{
		"AWS_REGION":                      "us-east-1",
		"AWS_ACCESS_KEY_ID":               "test",
		"AWS_SECRET_ACCESS_KEY":           "test",
		"AWS_EC2_METADATA_DISABLED":       "true",
		"AWS_LAMBDA_FUNCTION_NAME":        fn.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(fn.Timeout.Round(time.Second) / time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(fn.MemoryMB),
	}
	for k, v := range fn.Env {
		env[k] = v
	}
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", api)
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", rapi),
		"--log-level", "warn",
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = list
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lambdarie: start %s: %w", rie, err)
	}
	p := &Process{URL: "http://" + addr, InvokeURL: "http://" + addr + "/2015-03-31/functions/" + FunctionName + "/invocations", cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, errors.New("lambdarie: aws-lambda-rie exited at start")
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("lambdarie: aws-lambda-rie did not listen on %s within 15s", addr)
		}
	}
}

// Stop ends RIE and the bootstrap (their process group): SIGTERM, then
// SIGKILL after 5 s. It is safe to call more than once.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}
