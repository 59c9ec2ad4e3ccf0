package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sivchari/kumo"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/emulator"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/stack"
)

// Env is one test's view of a backend: clients and freshly created resources.
type Env struct {
	Backend  string
	Endpoint string
	AWS      aws.Config
	DDB      *dynamodb.Client
	SQS      *sqs.Client
	// S3 reaches the payload bucket (Names.PayloadBucket), created fresh
	// from the template like the tables and queues.
	S3    *s3.Client
	Names stack.Names
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
	if !inMain.Load() {
		// The servers live for the whole test process; without Main nothing
		// stops them, and a moto server's script and log stay behind.
		t.Fatal("testenv: the package needs func TestMain(m *testing.M) { testenv.Main(m) }")
	}
	endpoint, release, err := endpointFor(backend)
	if release != nil {
		// Registered first, so it runs last: after the test's own cleanups,
		// which may still call the server.
		t.Cleanup(release)
	}
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
	// DynamoDB's item-size limit, enforced as DynamoDB does (the emulators do
	// not), and no placeholder kumo would substitute differently from DynamoDB.
	cfg.APIOptions = append(cfg.APIOptions, counter.Register, faultinject.EnforceItemSize, faultinject.RefuseAmbiguousNames)
	e := &Env{Backend: backend, Endpoint: endpoint, AWS: cfg, DDB: awsclient.DynamoDB(cfg), SQS: awsclient.SQS(cfg), S3: awsclient.S3(cfg), Counter: counter}
	tpl := stack.MustLoadDefault()
	prefix := UniquePrefix()
	names, err := tpl.Create(ctx, e.DDB, e.SQS, prefix, nil)
	if err != nil {
		t.Fatalf("testenv: create resources on %s: %v", backend, err)
	}
	if err := tpl.CreateBuckets(ctx, e.S3, prefix, &names, nil); err != nil {
		t.Fatalf("testenv: create buckets on %s: %v", backend, err)
	}
	e.Names = names
	if !e.Disposable() {
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = tpl.Delete(cctx, e.DDB, e.SQS, names)
			_ = tpl.DeleteBuckets(cctx, e.S3, names)
		})
	}
	counter.Reset()
	return e
}

// Disposable reports whether what the Env creates ends with its server,
// which ends with the test process (kumo, moto): deleting it there (one
// request in seven of the worker tests' moto leg) proves and frees
// nothing.
func (e *Env) Disposable() bool { return e.Backend != "external" }

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
	inMain  atomic.Bool // Main runs the tests
	mu      sync.Mutex
	kumoSrv *kumo.Server
	motos   []*motoServer
	motoErr error
)

// motoServer is one moto_server of the pool and the number of Envs using it.
type motoServer struct {
	m    *emulator.Moto
	live int
}

// MotoServers is how many moto_servers a test process may run at once
// (TASKLEDGER_MOTO_SERVERS, default GOMAXPROCS, at least 2). moto is one
// Python process that serves DynamoDB one request at a time: every test
// of a package queued behind one server, and a package's parallel tests
// waited on each other's moto legs. Each Env's moto leg goes to the server
// with the fewest Envs, and a new server starts only when every running
// one is in use; an Env keeps its server to the end of its test.
func MotoServers() int {
	if n, err := strconv.Atoi(os.Getenv("TASKLEDGER_MOTO_SERVERS")); err == nil && n > 0 {
		return n
	}
	return max(2, runtime.GOMAXPROCS(0))
}

// endpointFor returns the backend's endpoint and, for a moto leg, the
// release of its server (nil otherwise).
func endpointFor(backend string) (string, func(), error) {
	mu.Lock()
	defer mu.Unlock()
	switch backend {
	case "kumo":
		if kumoSrv == nil {
			kumoSrv = kumo.NewServer()
		}
		return kumoSrv.URL, nil, nil
	case "moto":
		if motoErr != nil {
			return "", nil, motoErr
		}
		var s *motoServer
		for _, c := range motos {
			if s == nil || c.live < s.live {
				s = c
			}
		}
		if s == nil || (s.live > 0 && len(motos) < MotoServers()) {
			m, err := emulator.StartMoto(context.Background(), motoLog(len(motos)))
			switch {
			case errors.Is(err, emulator.ErrMotoUnavailable):
				motoErr = skip(err.Error())
				return "", nil, motoErr
			case err != nil && len(motos) == 0:
				motoErr = err
				return "", nil, err
			case err == nil:
				s = &motoServer{m: m}
				motos = append(motos, s)
			}
			// A further server that did not start: the Env shares a
			// running one.
		}
		s.live++
		return s.m.URL, func() {
			mu.Lock()
			s.live--
			mu.Unlock()
		}, nil
	case "external":
		ep := os.Getenv("AWS_ENDPOINT_URL")
		if ep == "" {
			return "", nil, skip("AWS_ENDPOINT_URL is not set")
		}
		return ep, nil, nil
	}
	return "", nil, fmt.Errorf("unknown backend %q (want kumo, moto or external)", backend)
}

// motoLog is where the i-th moto server's output goes: TASKLEDGER_MOTO_LOG
// for the first, with ".i" appended for the others ("" discards it).
func motoLog(i int) string {
	p := os.Getenv("TASKLEDGER_MOTO_LOG")
	if p == "" || i == 0 {
		return p
	}
	return fmt.Sprintf("%s.%d", p, i)
}

// Shutdown stops the servers this process started.
func Shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if kumoSrv != nil {
		kumoSrv.Close()
		kumoSrv = nil
	}
	for _, s := range motos {
		s.m.Stop()
	}
	motos = nil
}

// Main runs the package's tests and stops the servers afterwards. Use it
// as: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	inMain.Store(true)
	if !slices.Contains(Backends(), "external") {
		// The emulators are plain HTTP on loopback: no certificate is ever
		// checked, yet with AWS_CA_BUNDLE set (as on CI's machines) the SDK
		// parses the whole bundle in every config load, a tenth of a
		// package's CPU.
		os.Unsetenv("AWS_CA_BUNDLE")
	}
	code := m.Run()
	Shutdown()
	os.Exit(code)
}
