package stack

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/taskledger/taskledger/internal/emulator"
)

// startMoto starts a moto server for the test (internal/emulator's
// launcher, or a fork of make test's zygote) and returns its endpoint; it
// skips the test if moto is not installed, unless TASKLEDGER_REQUIRE_MOTO=1.
func startMoto(t *testing.T) string {
	t.Helper()
	m, err := emulator.StartMoto(context.Background(), "")
	if errors.Is(err, emulator.ErrMotoUnavailable) && os.Getenv("TASKLEDGER_REQUIRE_MOTO") != "1" {
		t.Skipf("%v (set TASKLEDGER_REQUIRE_MOTO=1 to fail instead)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m.URL
}
