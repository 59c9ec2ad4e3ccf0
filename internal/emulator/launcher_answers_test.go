package emulator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The launcher changes moto's DynamoDB internals for speed (expression
// caches, a rollback copy of only the items a transaction names, its own
// JSON writer, an unsorted Query read). The project's conditional-write
// tests prove their behaviour against moto through this launcher, so a
// patch that answered differently from moto would weaken every moto leg
// without failing any of them. testdata/launcher_answers_as_moto.py
// replays request sequences (cancelled and committed transactions over
// hash-only, hash and range, number-keyed and streamed tables, nested
// updates, failing and reused expressions, malformed keys), each followed
// by reads of every table, through stock moto and then through moto with
// the embedded launcher's patches, and exits 1 on any difference in
// status, body or later read.
func TestLauncherAnswersAsMotoDoes(t *testing.T) {
	py, script, ok := serialLauncher()
	if !ok {
		needMoto(t, fmt.Errorf("%w: no python3 with moto to compare the launcher with", ErrMotoUnavailable))
	}
	t.Cleanup(func() { _ = os.Remove(script) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, filepath.Join("testdata", "launcher_answers_as_moto.py"), script).CombinedOutput()
	if err != nil {
		t.Fatalf("the launcher's moto answers differently from moto (%v):\n%s", err, out)
	}
	t.Logf("%s", out)
}
