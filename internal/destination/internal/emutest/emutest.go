package emutest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/sivchari/kumo"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/emulator"
	"github.com/taskledger/taskledger/internal/testenv"
)

// Backend is one leg: its name, endpoint and an AWS configuration for it
// (SDK retries bounded as everywhere else).
type Backend struct {
	Name     string
	Endpoint string
	AWS      aws.Config
}

// Each runs fn once per selected backend, as parallel subtests named after
// it.
func Each(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, name := range testenv.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, New(t, name))
		})
	}
}

// New returns the named backend, or skips/fails as the package doc says.
func New(t testing.TB, name string) Backend {
	t.Helper()
	endpoint, err := endpointFor(name)
	if err != nil {
		var s skip
		if errors.As(err, &s) {
			if os.Getenv("TASKLEDGER_REQUIRE_MOTO") == "1" && name == "moto" {
				t.Fatalf("emutest: moto leg required (TASKLEDGER_REQUIRE_MOTO=1) but: %s", s)
			}
			t.Skipf("emutest: %s leg skipped: %s", name, s)
		}
		t.Fatalf("emutest: %s: %v", name, err)
	}
	opts := awsclient.Options{Endpoint: endpoint, MaxAttempts: 3}
	if name != "external" {
		opts.StaticCredentials = true
		opts.Region = "us-east-1"
	}
	cfg, err := awsclient.Load(context.Background(), opts)
	if err != nil {
		t.Fatalf("emutest: %v", err)
	}
	return Backend{Name: name, Endpoint: endpoint, AWS: cfg}
}

type skip string

func (s skip) Error() string { return string(s) }

var (
	mu      sync.Mutex
	kumoSrv *kumo.Server
	moto    *emulator.Moto
	motoErr error
)

func endpointFor(name string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	switch name {
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
	return "", fmt.Errorf("unknown backend %q (want kumo, moto or external)", name)
}

// Main runs the package's tests and stops the emulators afterwards: call it
// from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if kumoSrv != nil {
		kumoSrv.Close()
	}
	if moto != nil {
		moto.Stop()
	}
	mu.Unlock()
	os.Exit(code)
}
