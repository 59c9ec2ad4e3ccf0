package emulator

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"testing"
)

func TestStartStopMoto(t *testing.T) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		if os.Getenv("TASKLEDGER_REQUIRE_MOTO") == "1" {
			t.Fatal("moto_server is not on PATH and TASKLEDGER_REQUIRE_MOTO=1")
		}
		t.Skip("moto_server is not on PATH: the moto backend cannot be tested here")
	}
	m, err := StartMoto(context.Background(), "")
	if errors.Is(err, ErrMotoUnavailable) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(m.URL + "/moto-api/")
	if err != nil {
		t.Fatalf("moto not answering: %v", err)
	}
	resp.Body.Close()
	m.Stop()
	m.Stop() // idempotent
	if _, err := http.Get(m.URL + "/moto-api/"); err == nil {
		t.Fatal("moto still answering after Stop")
	}
}
