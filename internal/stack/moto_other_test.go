//go:build !linux

package stack

import "testing"

// startMoto needs Linux's parent-death signal to guarantee the subprocess
// never outlives the test binary; elsewhere the moto leg is skipped.
func startMoto(t *testing.T) string {
	t.Helper()
	t.Skip("the moto leg runs on Linux only (it relies on Pdeathsig)")
	return ""
}
