package emulator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A python3 that finds moto's packages but cannot import them (a broken
// dependency) makes the launcher exit at once: StartMoto says so with
// the launcher's own output, without waiting out its 30 s. Run in a child
// process: the interpreter is looked for once per process.
func TestMotoThatExitsAtOnceIsReportedWithItsOutput(t *testing.T) {
	if os.Getenv("EMULATOR_EARLY_EXIT_CHILD") == "1" {
		_, err := StartMoto(context.Background(), "")
		if err == nil {
			t.Fatal("StartMoto started a launcher that exits at once")
		}
		if msg := err.Error(); !strings.Contains(msg, "exited before it answered") || !strings.Contains(msg, "No module named 'markupsafe'") {
			t.Fatalf("error does not say the launcher exited and why: %v", err)
		}
		return
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "python3")
	// -c: the interpreter look (it finds the packages); anything else: the
	// launcher, which fails on an import.
	script := "#!/bin/sh\ncase \"$1\" in\n-c) echo " + fake + ";;\n*) echo \"ModuleNotFoundError: No module named 'markupsafe'\" >&2; exit 1;;\nesac\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMotoThatExitsAtOnceIsReportedWithItsOutput$", "-test.count=1")
	// The launcher itself is under test, not a zygote's fork.
	cmd.Env = append(os.Environ(), "EMULATOR_EARLY_EXIT_CHILD=1", "PATH="+dir, EnvMotoZygote+"=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("child did not pass:\n%s", out)
	}
}
