package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestAdmissionBurst: a burst far above the per-minute limits never puts
// more than the limit into any 60 s span, spends no attempt waiting, and
// completes every task; per admitted call the admission costs one Admit
// (plus a Settle when the usage differs, plus one refused Admit per wait).
func TestAdmissionBurst(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		n := 60
		if e.Backend == "moto" {
			n = 20
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var rows []AdmissionRow
		for _, sc := range DefaultAdmissionScenarios(n) {
			row, err := admissionRun(ctx, &soak.Backend{Name: e.Backend, AWS: e.AWS}, sc, 4)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
			if int64(row.MaxCallsPerMinute) > sc.RPM || row.MaxTokensPerMinute > sc.TPM {
				t.Errorf("%s: %d calls / %d tokens in one 60 s span, limits %d / %d", sc.Name, row.MaxCallsPerMinute, row.MaxTokensPerMinute, sc.RPM, sc.TPM)
			}
			if row.WaitingAttempts != 0 || row.Completed != n || row.ProviderCalls != n {
				t.Errorf("%s: %d attempts spent waiting, %d of %d completed, %d provider calls; want 0, all, one each", sc.Name, row.WaitingAttempts, row.Completed, n, row.ProviderCalls)
			}
			if row.Rounds < 2 || row.Waits == 0 {
				t.Errorf("%s: %d rounds, %d waits; the limit should have made the burst wait", sc.Name, row.Rounds, row.Waits)
			}
			// Successful admission writes: one Admit per call, at most one
			// Settle per call, and a seal per minute of the span (+1);
			// refused Admits: at most one per wait.
			ok := row.AdmissionCalls["DynamoDB.UpdateItem"] - row.AdmissionRefused
			seals := int(row.Span/time.Minute) + 2
			if ok < n || ok > 2*n+seals || row.AdmissionRefused > row.Waits {
				t.Errorf("%s: %d admission UpdateItems that passed, %d refused, for %d calls and %d waits; want %d..%d passed and at most %d refused",
					sc.Name, ok, row.AdmissionRefused, n, row.Waits, n, 2*n+seals, row.Waits)
			}
		}
		var out bytes.Buffer
		writeAdmissionTable(&out, rows)
		if !strings.Contains(out.String(), "no 60 s span exceeded its limit") {
			t.Errorf("table:\n%s", out.String())
		}
		t.Log("\n" + out.String())
	})
}
