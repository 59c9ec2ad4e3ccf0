package emulator

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/awsclient"
)

// startZygote runs moto_serial.py --zygote on a socket in a temporary
// directory and returns the socket's path and the zygote's process; it is
// killed when t ends.
func startZygote(t *testing.T) (string, *os.Process) {
	t.Helper()
	py, script, ok := serialLauncher()
	if !ok {
		needMoto(t, ErrMotoUnavailable)
	}
	t.Cleanup(func() { _ = os.Remove(script) })
	sock := filepath.Join(t.TempDir(), "zygote")
	cmd := exec.Command(py, script, "--zygote", sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return sock, cmd.Process
		}
		select {
		case <-exited:
			t.Fatalf("the zygote exited before it listened (%s)", cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the zygote did not listen within 30 s")
		}
		time.Sleep(20 * time.Millisecond) // an interpreter importing moto: no event to wait on
	}
}

// parentOf reads pid's parent from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces, so read after ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// With EnvMotoZygote set, StartMoto's servers are the zygote's forks, each
// on a port of its own, serving DynamoDB in a region AWS does not have (as
// a server StartMoto starts itself does); Stop ends one, and the others die
// with the zygote.
func TestZygoteForksServersThatStopAndDieWithIt(t *testing.T) {
	sock, zygote := startZygote(t)
	t.Setenv(EnvMotoZygote, sock)
	var servers []*Moto
	for range 2 {
		m, err := StartMoto(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		servers = append(servers, m)
		if m.cmd != nil || parentOf(t, m.pid) != zygote.Pid {
			t.Fatalf("server %d (%s) is not the zygote's fork", m.pid, m.URL)
		}
	}
	if servers[0].URL == servers[1].URL {
		t.Fatalf("both servers on %s", servers[0].URL)
	}
	db := awsclient.DynamoDB(sdkConfig(t, servers[0].URL, "xx-nowhere-1"))
	if _, err := db.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables in xx-nowhere-1: %v", err)
	}

	servers[0].Stop()
	if _, err := http.Get(servers[0].URL + "/moto-api/"); err == nil {
		t.Fatal("a stopped server still answers")
	}
	if err := syscall.Kill(servers[1].pid, 0); err != nil {
		t.Fatalf("stopping one server ended the other: %v", err)
	}

	if err := zygote.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-servers[1].exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a forked server outlived its zygote by 10 s")
	}
}

// A zygote that is gone leaves StartMoto to start a server of its own.
func TestStartMotoWithoutItsZygoteStartsItsOwnServer(t *testing.T) {
	t.Setenv(EnvMotoZygote, filepath.Join(t.TempDir(), "no-zygote"))
	m, err := StartMoto(context.Background(), "")
	if err != nil {
		needMoto(t, err)
	}
	defer m.Stop()
	if m.cmd == nil || parentOf(t, m.pid) != os.Getpid() {
		t.Fatalf("server %d is not this process's child", m.pid)
	}
	if m.tempLog == "" {
		t.Fatal("the server keeps no log of its own")
	}
}
