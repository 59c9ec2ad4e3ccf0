package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sivchari/kumo"
)

// Legs lists the backends selected by TASKLEDGER_BACKENDS (comma-separated,
// default "kumo,moto").
func Legs() []string {
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

// errLegSkipped marks a leg that cannot run here (moto not installed,
// AWS_ENDPOINT_URL unset).
var errLegSkipped = errors.New("leg unavailable")

var (
	legMu   sync.Mutex
	legKumo *kumo.Server
	legMoto *Moto
	legErr  error
)

// LegEndpoint returns the endpoint of the named leg ("kumo", "moto" or
// "external"), starting its server on first use; servers are shared by the
// process until [StopLegs]. An unavailable leg's error wraps an error that
// [LegSkipped] reports.
func LegEndpoint(name string) (string, error) {
	legMu.Lock()
	defer legMu.Unlock()
	switch name {
	case "kumo":
		if legKumo == nil {
			legKumo = kumo.NewServer()
		}
		return legKumo.URL, nil
	case "moto":
		if legMoto == nil && legErr == nil {
			legMoto, legErr = StartMoto(context.Background(), os.Getenv("TASKLEDGER_MOTO_LOG"))
			if errors.Is(legErr, ErrMotoUnavailable) {
				legErr = fmt.Errorf("%w: %w", errLegSkipped, legErr)
			}
		}
		if legErr != nil {
			return "", legErr
		}
		return legMoto.URL, nil
	case "external":
		if ep := os.Getenv("AWS_ENDPOINT_URL"); ep != "" {
			return ep, nil
		}
		return "", fmt.Errorf("%w: AWS_ENDPOINT_URL is not set", errLegSkipped)
	}
	return "", fmt.Errorf("emulator: unknown leg %q (want kumo, moto or external)", name)
}

// LegSkipped reports whether err from [LegEndpoint] means "this leg cannot
// run here" rather than a failure.
func LegSkipped(err error) bool { return errors.Is(err, errLegSkipped) }

// LegFor returns the named leg's endpoint for a test, skipping the test
// with the reason printed when the leg is unavailable — except the moto leg
// under TASKLEDGER_REQUIRE_MOTO=1, whose absence fails it.
func LegFor(t testing.TB, name string) string {
	t.Helper()
	ep, err := LegEndpoint(name)
	switch {
	case err == nil:
		return ep
	case LegSkipped(err) && !(name == "moto" && os.Getenv("TASKLEDGER_REQUIRE_MOTO") == "1"):
		t.Skipf("emulator: %s leg skipped: %v", name, err)
	case LegSkipped(err):
		t.Fatalf("emulator: moto leg required (TASKLEDGER_REQUIRE_MOTO=1) but: %v", err)
	default:
		t.Fatalf("emulator: %s: %v", name, err)
	}
	return ""
}

// StopLegs stops the servers [LegEndpoint] started. Call it from TestMain
// after m.Run.
func StopLegs() {
	legMu.Lock()
	defer legMu.Unlock()
	if legKumo != nil {
		legKumo.Close()
		legKumo = nil
	}
	if legMoto != nil {
		legMoto.Stop()
		legMoto = nil
	}
	legErr = nil
}
