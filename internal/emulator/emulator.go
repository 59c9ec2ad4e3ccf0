package emulator

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrMotoUnavailable is returned (wrapped) when neither python3 with moto
// nor moto_server is on PATH.
var ErrMotoUnavailable = errors.New("moto_server is not on PATH (install moto[server] 5.2.1)")

//go:embed moto_serial.py
var motoSerial []byte

// EnvMotoZygote names the Unix socket of a moto zygote (moto_serial.py
// --zygote), which make test starts: StartMoto asks it to fork each server
// with moto already imported instead of starting an interpreter, which
// spent about a second of CPU on imports in each of the dozens of servers
// a run starts. Unset, or a zygote that does not answer: StartMoto starts
// a server of its own.
const EnvMotoZygote = "TASKLEDGER_MOTO_ZYGOTE"

// Moto is a running moto server.
type Moto struct {
	URL string

	cmd      *exec.Cmd     // the server, when this process started it
	pid      int           // the server's process (and process group)
	exited   chan struct{} // closed when the process has ended
	script   string
	tempLog  string // moto's output when the caller keeps none
	portFile string // where the launcher names the port it took
	once     sync.Once
}

// StartMoto starts moto on a free 127.0.0.1 port and waits until it answers
// (30 s at most). The server dies with this process (Pdeathsig), or, forked
// by a zygote (EnvMotoZygote), with the zygote; Stop ends it earlier. If
// logPath is not empty, moto's output goes there.
func StartMoto(ctx context.Context, logPath string) (*Moto, error) {
	m := &Moto{}
	py, script, ok := serialLauncher()
	if ok {
		// The launcher binds a free port itself and names it in a file of
		// this start's own (a log path may be shared by several starts): a
		// port chosen here and bound there could be taken in between by
		// another process's server, which the readiness probe would then
		// mistake for this one.
		m.script = script
		var err error
		if m.portFile, err = newPortFile(); err != nil {
			m.removeFiles()
			return nil, err
		}
		if sock := os.Getenv(EnvMotoZygote); sock != "" {
			if m.fork(sock, logPath) == nil {
				return m.await(ctx, logPath)
			}
			// A fresh port file for the server of its own: a zygote that
			// answered too late may still have forked one naming its port
			// in the first.
			_ = os.Remove(m.portFile)
			if m.portFile, err = newPortFile(); err != nil {
				m.removeFiles()
				return nil, err
			}
		}
		m.cmd = exec.Command(py, script, "127.0.0.1", "0", m.portFile)
	} else {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		bin, err := exec.LookPath("moto_server")
		if err != nil {
			return nil, ErrMotoUnavailable
		}
		m.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
		m.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	m.cmd.Env = append(os.Environ(), "MOTO_ALLOW_NONEXISTENT_REGION=true")
	// Without a log path the output still goes to a file of its own, read
	// back if moto exits before it answers (an import error says why) and
	// removed when it stops.
	out, err := openLog(logPath)
	if err == nil {
		m.cmd.Stdout, m.cmd.Stderr = out, out
		if logPath == "" {
			m.tempLog = out.Name()
		}
	}
	if err := m.cmd.Start(); err != nil {
		m.removeFiles()
		closeLog(out)
		return nil, fmt.Errorf("emulator: start moto: %w", err)
	}
	m.pid = m.cmd.Process.Pid
	m.exited = make(chan struct{})
	go func() { _ = m.cmd.Wait(); closeLog(out); close(m.exited) }()
	return m.await(ctx, logPath)
}

// newPortFile creates the empty file a launcher names its port in.
func newPortFile() (string, error) {
	f, err := os.CreateTemp("", "moto-port-*")
	if err != nil {
		return "", fmt.Errorf("emulator: moto's port file: %w", err)
	}
	_ = f.Close()
	return f.Name(), nil
}

// fork asks the zygote listening on sock for a server that names its port
// in m.portFile and appends its output to logPath's file (or to a
// temporary log), and watches for its end.
func (m *Moto) fork(sock, logPath string) (err error) {
	out, err := openLog(logPath)
	if err != nil {
		return err
	}
	closeLog(out)
	if logPath == "" {
		m.tempLog = out.Name()
		defer func() {
			if err != nil { // StartMoto starts a server of its own, with its own log
				_ = os.Remove(m.tempLog)
				m.tempLog = ""
			}
		}()
	}
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req, _ := json.Marshal(map[string]string{"port_file": m.portFile, "log": out.Name()})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return fmt.Errorf("emulator: moto zygote answered %q", clip(line))
	}
	m.pid = pid
	m.exited = make(chan struct{})
	go func() {
		// Not this process's child: nothing to wait on but its absence (the
		// zygote reaps it at once).
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(100 * time.Millisecond)
		}
		close(m.exited)
	}()
	return nil
}

// await waits until the started server answers (30 s at most).
func (m *Moto) await(ctx context.Context, logPath string) (*Moto, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := errors.New("its port not named yet")
		if m.URL == "" {
			m.URL = m.listening()
		}
		if m.URL != "" {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.URL+"/moto-api/", nil)
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				return m, nil
			}
		}
		select {
		case <-m.exited:
			head := m.outputHead(logPath)
			m.removeFiles()
			return nil, fmt.Errorf("emulator: moto exited before it answered%s (%s); its output begins:\n%s", m.on(), m.exitState(), head)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			head := m.outputHead(logPath) // before Stop removes a temporary log
			m.Stop()
			return nil, fmt.Errorf("emulator: moto did not answer%s within 30s: %v; its output begins:\n%s", m.on(), err, head)
		}
		time.Sleep(50 * time.Millisecond) // a starting server: no event to wait on
	}
}

// exitState says how the server ended, as far as this process knows.
func (m *Moto) exitState() string {
	if m.cmd != nil && m.cmd.ProcessState != nil {
		return m.cmd.ProcessState.String()
	}
	return "forked by the zygote; its status is the zygote's"
}

// Stop ends moto (SIGTERM, then SIGKILL after 5 s). Safe to call twice.
func (m *Moto) Stop() {
	m.once.Do(func() {
		signal := func(sig syscall.Signal) {
			// The group, or the process alone if it has none yet (a
			// forked server makes its group first thing).
			if syscall.Kill(-m.pid, sig) != nil {
				_ = syscall.Kill(m.pid, sig)
			}
		}
		signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(5 * time.Second):
			signal(syscall.SIGKILL)
			<-m.exited
		}
		m.removeFiles()
	})
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// on names where moto was to answer, if it is known yet.
func (m *Moto) on() string {
	if m.URL == "" {
		return ""
	}
	return " on " + m.URL
}

// listening returns the URL of the port the launcher named in its port
// file ("PORT\n"), or "" if it has named none yet.
func (m *Moto) listening() string {
	b, err := os.ReadFile(m.portFile)
	if err != nil || len(b) < 2 || b[len(b)-1] != '\n' {
		return ""
	}
	port, err := strconv.Atoi(string(b[:len(b)-1]))
	if err != nil || port <= 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

func openLog(path string) (*os.File, error) {
	if path == "" {
		return os.CreateTemp("", "moto-*.log")
	}
	return os.Create(path)
}

func closeLog(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

// outputHead returns the first 2 KB moto wrote (to logPath, or to its
// temporary log).
func (m *Moto) outputHead(logPath string) string {
	if logPath == "" {
		logPath = m.tempLog
	}
	f, err := os.Open(logPath)
	if err != nil {
		return "(not kept)"
	}
	defer f.Close()
	b := make([]byte, 2048)
	n, _ := io.ReadFull(f, b)
	return string(b[:n])
}

func (m *Moto) removeFiles() {
	m.removeScript()
	if m.portFile != "" {
		_ = os.Remove(m.portFile)
	}
	if m.tempLog != "" {
		_ = os.Remove(m.tempLog)
	}
}

func (m *Moto) removeScript() {
	if m.script != "" {
		_ = os.Remove(m.script)
	}
}

// motoPython is the interpreter behind python3 when it has moto and the
// server's packages, looked for once per process ("" if none). The look
// finds the packages without importing them (an import of moto is most of
// a second of CPU, in every test process), and names the interpreter
// itself: a version manager's python3 shim costs a shell per start. A
// launcher that cannot import them after all exits at once (StartMoto
// says so).
var motoPython = sync.OnceValue(func() string {
	py, err := exec.LookPath("python3")
	if err != nil {
		return ""
	}
	out, err := exec.Command(py, "-c", "import importlib.util as u, sys\n"+
		"all(u.find_spec(m) for m in ('moto', 'flask', 'flask_cors', 'werkzeug')) or sys.exit(1)\n"+
		"print(sys.executable)").Output()
	if err != nil {
		return ""
	}
	if exe := strings.TrimSpace(string(out)); exe != "" {
		return exe
	}
	return py
})

// serialLauncher writes moto_serial.py to a temporary file and returns a
// python3 that can import moto.
func serialLauncher() (python, script string, ok bool) {
	py := motoPython()
	if py == "" {
		return "", "", false
	}
	f, err := os.CreateTemp("", "moto_serial-*.py")
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	if _, err := f.Write(motoSerial); err != nil {
		_ = os.Remove(f.Name())
		return "", "", false
	}
	return py, f.Name(), true
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
