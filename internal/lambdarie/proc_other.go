//go:build !linux && !windows

package lambdarie

import "syscall"

// sysProcAttr puts RIE in its own process group (Stop ends it and the
// bootstrap together).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
