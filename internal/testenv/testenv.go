package testenv

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sivchari/kumo"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/stack"
)

// Env is one test's view of a backend: clients and freshly created resources.
type Env struct {
	Backend  string
	Endpoint string
	AWS      aws.Config
	DDB      *dynamodb.Client
	SQS      *sqs.Client
	Names    stack.Names
	// Counter counts every AWS call the clients above make.
	Counter *awsclient.Counter
}

// Backends lists the legs selected by TASKLEDGER_BACKENDS.
func Backends() []string {
	v := os.Getenv("TASKLEDGER_BACKENDS")
	if v == "" {
		return []string{"kumo", "moto"}
	}
	var out []string
	for _, b := range strings.Split(v, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Each runs fn once per selected backend, as parallel subtests named after it.
func Each(t *testing.T, fn func(t *testing.T, e *Env)) {
	t.Helper()
	for _, b := range Backends() {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, New(t, b))
		})
	}
}

// New creates a fresh Env on the named backend, or skips/fails as documented.
func New(t testing.TB, backend string) *Env {
	t.Helper()
	endpoint, err := endpointFor(backend)
	if err != nil {
		if s, ok := err.(skip); ok {
			if os.Getenv("TASKLEDGER_REQUIRE_MOTO") == "1" && backend == "moto" {
				t.Fatalf("testenv: moto leg required (TASKLEDGER_REQUIRE_MOTO=1) but: %s", s)
			}
			t.Skipf("testenv: %s leg skipped: %s", backend, s)
		}
		t.Fatalf("testenv: %s: %v", backend, err)
	}
	ctx := context.Background()
	counter := awsclient.NewCounter()
	opts := awsclient.Options{Endpoint: endpoint, MaxAttempts: 3, HTTPClient: awsclient.DefaultHTTPClient()}
	if backend != "external" {
		opts.StaticCredentials = true
		opts.Region = "us-east-1"
	}
	cfg, err := awsclient.Load(ctx, opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cfg.APIOptions = append(cfg.APIOptions, counter.Register)
	e := &Env{Backend: backend, Endpoint: endpoint, AWS: cfg, DDB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), Counter: counter}
	tpl := stack.MustLoadDefault()
	prefix := UniquePrefix()
	names, err := tpl.Create(ctx, e.DDB, e.SQS, prefix, nil)
	if err != nil {
		t.Fatalf("testenv: create resources on %s: %v", backend, err)
	}
	e.Names = names
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = tpl.Delete(cctx, e.DDB, e.SQS, names)
	})
	counter.Reset()
	return e
}

var seq atomic.Int64

// UniquePrefix returns a short prefix unique to this process and call.
func UniquePrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("t%d%s", seq.Add(1), hex.EncodeToString(b[:]))
}

type skip string

func (s skip) Error() string { return string(s) }

var (
	mu      sync.Mutex
	kumoSrv *kumo.Server
	motoURL string
	motoErr error
	motoCmd *exec.Cmd
	// motoScript is the temporary launcher file, removed by Shutdown.
	motoScript string
)

func endpointFor(backend string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	switch backend {
	case "kumo":
		if kumoSrv == nil {
			kumoSrv = kumo.NewServer()
		}
		return kumoSrv.URL, nil
	case "moto":
		if motoURL == "" && motoErr == nil {
			motoURL, motoErr = startMoto()
		}
		return motoURL, motoErr
	case "external":
		ep := os.Getenv("AWS_ENDPOINT_URL")
		if ep == "" {
			return "", skip("AWS_ENDPOINT_URL is not set")
		}
		return ep, nil
	}
	return "", fmt.Errorf("unknown backend %q (want kumo, moto or external)", backend)
}

// MotoPath is the moto_server binary looked up on PATH.
const MotoPath = "moto_server"

func startMoto() (string, error) {
	bin, err := exec.LookPath(MotoPath)
	if err != nil {
		return "", skip("moto_server is not on PATH (install moto[server] 5.2.1 to run this leg)")
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	// Prefer moto's app behind a request lock (see moto_serial.py); fall
	// back to plain moto_server when no python3 on PATH can import moto.
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	py, script, ok := serialLauncher()
	if ok {
		cmd = exec.Command(py, script, "127.0.0.1", fmt.Sprint(port))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if p := os.Getenv("TASKLEDGER_MOTO_LOG"); p != "" {
		if f, err := os.Create(p); err == nil {
			cmd.Stdout, cmd.Stderr = f, f
		}
	}
	cmd.Env = append(os.Environ(), "MOTO_ALLOW_NONEXISTENT_REGION=true")
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start moto_server: %w", err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return "", fmt.Errorf("moto_server did not answer on %s within 30s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	motoCmd = cmd
	motoScript = script
	return url, nil
}

//go:embed moto_serial.py
var motoSerial []byte

// serialLauncher writes moto_serial.py to a temporary file and returns the
// python3 that can import moto.
func serialLauncher() (python, script string, ok bool) {
	py, err := exec.LookPath("python3")
	if err != nil || exec.Command(py, "-c", "import moto.moto_server.werkzeug_app").Run() != nil {
		return "", "", false
	}
	f, err := os.CreateTemp("", "moto_serial-*.py")
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	if _, err := f.Write(motoSerial); err != nil {
		return "", "", false
	}
	return py, f.Name(), true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Shutdown stops the servers this process started.
func Shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if kumoSrv != nil {
		kumoSrv.Close()
		kumoSrv = nil
	}
	if motoCmd != nil {
		_ = syscall.Kill(-motoCmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = motoCmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-motoCmd.Process.Pid, syscall.SIGKILL)
		}
		motoCmd, motoURL = nil, ""
		if motoScript != "" {
			_ = os.Remove(motoScript)
		}
	}
}

// Main runs the package's tests and stops the servers afterwards. Use it
// as: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}
