package soak

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/sivchari/kumo"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/stack"
)

// Env is where a soak runs: a clean AWS configuration (no faults; the
// poller, the checker and the test's own reads use it) and fresh resources
// created from template.yaml.
type Env struct {
	Backend string
	AWS     aws.Config
	Names   stack.Names
}

// Backend is a running emulator (or an external endpoint) on which fresh
// stacks can be created.
type Backend struct {
	Name string
	// AWS is a clean configuration (no faults) for the endpoint.
	AWS  aws.Config
	stop func()
}

// OpenBackend brings up a backend: "kumo" (embedded emulator), "moto"
// (moto_server on a free loopback port, behind a DynamoDB request lock; see
// motoLauncher) or "external" (AWS_ENDPOINT_URL, or the default AWS chain).
func OpenBackend(ctx context.Context, name string) (b *Backend, err error) {
	var stop func()
	endpoint := ""
	switch name {
	case "", "kumo":
		name = "kumo"
		srv := kumo.NewServer()
		endpoint, stop = srv.URL, srv.Close
	case "moto":
		endpoint, stop, err = startMoto(ctx)
		if err != nil {
			return nil, err
		}
	case "external":
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
		stop = func() {}
	default:
		return nil, fmt.Errorf("soak: unknown backend %q (kumo, moto or external)", name)
	}
	opts := awsclient.Options{Endpoint: endpoint, HTTPClient: awsclient.DefaultHTTPClient(), MaxAttempts: 3}
	if name != "external" {
		opts.StaticCredentials, opts.Region = true, "us-east-1"
	}
	cfg, err := awsclient.Load(ctx, opts)
	if err != nil {
		stop()
		return nil, err
	}
	return &Backend{Name: name, AWS: cfg, stop: stop}, nil
}

// Endpoint returns the backend's endpoint URL ("" for the default chain).
func (b *Backend) Endpoint() string { return aws.ToString(b.AWS.BaseEndpoint) }

// Close stops what OpenBackend started (nothing for a Backend built from an
// existing configuration).
func (b *Backend) Close() {
	if b.stop != nil {
		b.stop()
	}
}

// NewEnv creates a fresh stack from template.yaml, named with prefix and a
// random suffix; drop deletes it.
func (b *Backend) NewEnv(ctx context.Context, prefix string) (env *Env, drop func(), err error) {
	ddb, sq := awsclient.DynamoDB(b.AWS), awsclient.SQS(b.AWS)
	tpl := stack.MustLoadDefault()
	var r [3]byte
	_, _ = rand.Read(r[:])
	names, err := tpl.Create(ctx, ddb, sq, prefix+hex.EncodeToString(r[:]), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("soak: create resources on %s: %w", b.Name, err)
	}
	return &Env{Backend: b.Name, AWS: b.AWS, Names: names}, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = tpl.Delete(cctx, ddb, sq, names)
	}, nil
}

// StartBackend opens a backend and creates one fresh stack on it; close
// deletes the stack and stops the backend.
func StartBackend(ctx context.Context, name string) (env *Env, close func(), err error) {
	b, err := OpenBackend(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	env, drop, err := b.NewEnv(ctx, "soak")
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return env, func() { drop(); b.Close() }, nil
}

// motoLauncher serves moto's WSGI app with DynamoDB requests behind a lock,
// as internal/testenv does: plain moto_server evaluates a DynamoDB condition
// and applies the write without a lock, so two concurrent conditional puts of
// one item can both succeed, which real DynamoDB never allows. Unlike
// testenv's launcher it leaves SQS requests out of the lock, so a long poll
// does not stall every other request for its wait.
//
//go:embed moto_launcher.py
var motoLauncher []byte

func startMoto(ctx context.Context) (string, func(), error) {
	py, err := exec.LookPath("python3")
	if err != nil || exec.Command(py, "-c", "import moto.moto_server.werkzeug_app").Run() != nil {
		return "", nil, errors.New("soak: moto backend needs python3 with moto[server] 5.2.1 importable")
	}
	f, err := os.CreateTemp("", "soak-moto-*.py")
	if err != nil {
		return "", nil, err
	}
	script := f.Name()
	_, werr := f.Write(motoLauncher)
	f.Close()
	if werr != nil {
		os.Remove(script)
		return "", nil, werr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Remove(script)
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(py, script, "127.0.0.1", fmt.Sprint(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Env = append(os.Environ(), "MOTO_ALLOW_NONEXISTENT_REGION=true")
	if err := cmd.Start(); err != nil {
		os.Remove(script)
		return "", nil, fmt.Errorf("soak: start moto: %w", err)
	}
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		os.Remove(script)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/moto-api/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return url, stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("soak: moto did not answer on %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a starting server; no event to wait on
	}
}
