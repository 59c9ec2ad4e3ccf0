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
// more than the limit into one window, spends no attempt waiting, and
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
			if int64(row.MaxCallsPerWindow) > sc.RPM || row.MaxTokensPerWindow > sc.TPM {
				t.Errorf("%s: %d calls / %d tokens in one window, limits %d / %d", sc.Name, row.MaxCallsPerWindow, row.MaxTokensPerWindow, sc.RPM, sc.TPM)
			}
			if row.WaitingAttempts != 0 || row.Completed != n || row.ProviderCalls != n {
				t.Errorf("%s: %d attempts spent waiting, %d of %d completed, %d provider calls; want 0, all, one each", sc.Name, row.WaitingAttempts, row.Completed, n, row.ProviderCalls)
			}
			if row.Windows < 2 || row.Waits == 0 {
				t.Errorf("%s: %d windows, %d waits; the limit should have made the burst wait", sc.Name, row.Windows, row.Waits)
			}
			// Admits: one per delivery (admitted or not); Settles: at most one per call.
			admits := row.AdmissionCalls["DynamoDB.UpdateItem"]
			if admits < n+row.Waits || admits > 2*n+row.Waits {
				t.Errorf("%s: %d admission UpdateItems for %d calls and %d waits; want between %d and %d", sc.Name, admits, n, row.Waits, n+row.Waits, 2*n+row.Waits)
			}
		}
		var out bytes.Buffer
		writeAdmissionTable(&out, rows)
		if !strings.Contains(out.String(), "no window exceeded its limit") {
			t.Errorf("table:\n%s", out.String())
		}
		t.Log("\n" + out.String())
	})
}
