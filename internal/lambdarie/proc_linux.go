package lambdarie

import "syscall"

// sysProcAttr puts RIE in its own process group (Stop ends it and the
// bootstrap together) and kills it if this process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
