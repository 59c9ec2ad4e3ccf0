package emulator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// A client that goes before the zygote answers (a test process killed by
// -timeout or Ctrl-C mid-request, or one whose 10 s deadline passed on a
// loaded machine) must cost only its own server: the zygote keeps serving,
// and the servers it forked for other test processes keep answering.
func TestZygoteOutlivesAClientThatHangsUpBeforeItsAnswer(t *testing.T) {
	sock, zygote := startZygote(t)
	t.Setenv(EnvMotoZygote, sock)
	m, err := StartMoto(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)

	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]string{"port_file": filepath.Join(t.TempDir(), "port"), "log": ""})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close() // gone before the answer

	// The zygote serves starts one at a time: a fork it answers now came
	// after it dealt with the client that hung up.
	after, err := StartMoto(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(after.Stop)
	if after.cmd != nil {
		t.Fatal("the start after the hang-up was not the zygote's fork")
	}
	if err := syscall.Kill(zygote.Pid, 0); err != nil {
		t.Fatalf("the zygote ended after a client hung up: %v", err)
	}
	select {
	case <-m.exited:
		t.Fatal("another test's server ended when a client hung up on the zygote")
	default:
	}
	resp, err := http.Get(m.URL + "/moto-api/")
	if err != nil {
		t.Fatalf("another test's server no longer answers: %v", err)
	}
	resp.Body.Close()
}

// A test process that ends without Stop (killed by go test's -timeout, a
// crash) takes its moto servers with it, as a server it started itself
// dies with it (Pdeathsig): they do not idle on for the rest of the run.
func TestZygoteServerDiesWithTheTestProcessThatAskedForIt(t *testing.T) {
	if os.Getenv("EMULATOR_ZYGOTE_CLIENT_CHILD") == "1" {
		m, err := StartMoto(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("server-pid %d\n", m.pid)
		time.Sleep(time.Hour) // killed by the parent
		return
	}
	sock, _ := startZygote(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestZygoteServerDiesWithTheTestProcessThatAskedForIt$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "EMULATOR_ZYGOTE_CLIENT_CHILD=1", EnvMotoZygote+"="+sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var got strings.Builder
	lines := bufio.NewScanner(out)
	for pid == 0 && lines.Scan() {
		got.WriteString(lines.Text() + "\n")
		if rest, ok := strings.CutPrefix(lines.Text(), "server-pid "); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(rest))
		}
	}
	if pid == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child named no server:\n%s", got.String())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
	t.Fatalf("server %d still runs 5 s after the test process that asked for it was killed", pid)
}

// Servers forked by one zygote draw their identifiers (SQS message ids
// and receipt handles, DynamoDB stream event ids) from sources of their
// own, as servers started each in a fresh interpreter do: two servers of
// one run never hand out the same ids in the same order.
func TestZygoteServersDrawDistinctIdentifiers(t *testing.T) {
	sock, _ := startZygote(t)
	t.Setenv(EnvMotoZygote, sock)
	var ids []string
	for range 2 {
		m, err := StartMoto(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		q := sqs.NewFromConfig(sdkConfig(t, m.URL, "us-east-1"))
		created, err := q.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("q")})
		if err != nil {
			t.Fatal(err)
		}
		sent, err := q.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: aws.String("x")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(sent.MessageId))
	}
	if ids[0] == ids[1] {
		t.Fatalf("both servers named their first message %s", ids[0])
	}
}

// A forked server runs at the priority of the test process that asked for
// it, as a server that process started itself would: make test runs some
// packages at nice 19 so that they take only the CPU the soak leaves, and
// their moto servers must not take it at the zygote's priority instead.
func TestZygoteServerRunsAtItsClientsPriority(t *testing.T) {
	if os.Getenv("EMULATOR_ZYGOTE_NICE_CHILD") == "1" {
		// Started at nice 7 (below): every thread of this process is. A
		// Setpriority here would set only the calling thread's, and the
		// zygote reads the process's (its main thread's) priority.
		m, err := StartMoto(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Stop()
		fmt.Printf("server-nice %d\n", niceOf(t, strconv.Itoa(m.pid)))
		return
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("skipped: no /proc to read a process's priority from: %v", err)
	}
	// nice -n 7 is relative (and capped at 19): under make test's nice 19
	// the client, the zygote and the server would all run at 19.
	want := min(niceOf(t, "self")+7, 19)
	if want == niceOf(t, "self") {
		t.Fatalf("this test runs at nice %d: a client started 7 lower cannot be told from the zygote", want)
	}
	sock, _ := startZygote(t)
	nice, err := exec.LookPath("nice")
	if err != nil {
		t.Fatalf("nice (coreutils) is needed to start the client at a lower priority: %v", err)
	}
	cmd := exec.Command(nice, "-n", "7", os.Args[0], "-test.run=^TestZygoteServerRunsAtItsClientsPriority$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "EMULATOR_ZYGOTE_NICE_CHILD=1", EnvMotoZygote+"="+sock)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if w := fmt.Sprintf("server-nice %d\n", want); !strings.Contains(string(out), w) {
		t.Fatalf("the server forked for a client at nice %d does not run at nice %d:\n%s", want, want, out)
	}
}

// niceOf reads the nice value of process pid ("self": this one) from
// /proc: field 19, counted after the name, which ends at the last ')'.
func niceOf(t *testing.T, pid string) int {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatalf("nice of %s: %q: %v", pid, fields[16], err)
	}
	return n
}
