package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
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
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = tpl.Delete(cctx, e.DDB, e.SQS, names)
		_ = tpl.DeleteBuckets(cctx, e.S3, names)
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
	moto    *emulator.Moto
	motoErr error
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
		if moto == nil && motoErr == nil {
			moto, motoErr = emulator.StartMoto(context.Background(), os.Getenv("TASKLEDGER_MOTO_LOG"))
			if errors.Is(motoErr, emulator.ErrMotoUnavailable) {
				motoErr = skip(motoErr.Error())
			}
		}
		if motoErr != nil {
			return "", motoErr
		}
		return moto.URL, nil
	case "external":
		ep := os.Getenv("AWS_ENDPOINT_URL")
		if ep == "" {
			return "", skip("AWS_ENDPOINT_URL is not set")
		}
		return ep, nil
	}
	return "", fmt.Errorf("unknown backend %q (want kumo, moto or external)", backend)
}

// Shutdown stops the servers this process started.
func Shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if kumoSrv != nil {
		kumoSrv.Close()
		kumoSrv = nil
	}
	if moto != nil {
		moto.Stop()
		moto = nil
	}
}

// Main runs the package's tests and stops the servers afterwards. Use it
// as: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}
