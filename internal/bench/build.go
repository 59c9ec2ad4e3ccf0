package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/taskledger/taskledger/internal/soak"
)

// Functions are the deployed functions, built from functions/<name>.
var Functions = []string{"submit", "worker", "reconciler"}

// BuildRow is one function's bootstrap.
type BuildRow struct {
	Function string
	// Bytes is the size of the linux/arm64 bootstrap as deployed.
	Bytes int64
	// Init is the median, over initRuns, of a host build's time from
	// process start to its first GET of the next invocation from a local
	// Runtime API stand-in: what the function does before it can serve.
	Init time.Duration
	Err  string
}

const initRuns = 5

// flags are the deployment build flags (Makefile build-%).
var flags = []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w"}

func buildAll(ctx context.Context, b *soak.Backend, cfg Config) []BuildRow {
	root := cfg.Root
	if root == "" {
		out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
			return []BuildRow{{Function: "all", Err: "cannot find the module root (go env GOMOD)"}}
		}
		root = filepath.Dir(strings.TrimSpace(string(out)))
	}
	dir, err := os.MkdirTemp("", "taskledger-bench-")
	if err != nil {
		return []BuildRow{{Function: "all", Err: err.Error()}}
	}
	defer os.RemoveAll(dir)
	env, drop, err := b.NewEnv(ctx, "benchinit")
	if err != nil {
		return []BuildRow{{Function: "all", Err: err.Error()}}
	}
	defer drop()
	// The submit function reads its task id key from Secrets Manager at
	// init (the template's TaskIdKeySecret): the emulator holds one.
	secret, err := secretsmanager.NewFromConfig(b.AWS).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("benchinit-" + filepath.Base(dir)), SecretString: aws.String(strings.Repeat("k", 64)),
	})
	if err != nil {
		return []BuildRow{{Function: "all", Err: "create the task id key secret: " + err.Error()}}
	}
	fnEnv := []string{
		"AUTH_MODE=none", "TASK_ID_KEY_SECRET_ARN=" + aws.ToString(secret.ARN),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_ENDPOINT_URL=" + b.Endpoint(),
		"TASKS_TABLE=" + env.Names.TasksTable, "REVIEW_TABLE=" + env.Names.ReviewTable, "WATCH_TABLE=" + env.Names.WatchTable,
		"TASK_QUEUE_URL=" + env.Names.TaskQueueURL, "DEAD_LETTER_QUEUE_URL=" + env.Names.DeadLetterQueueURL,
		"PROVIDER=simulated", "LEASE_SECONDS=30", "LOG_LEVEL=error", "ALLOWED_ORIGINS=",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
	}
	var rows []BuildRow
	for _, fn := range Functions {
		row := BuildRow{Function: fn}
		arm := filepath.Join(dir, fn, "bootstrap")
		if err := goBuild(ctx, root, arm, "./functions/"+fn, "linux", "arm64"); err != nil {
			row.Err = err.Error()
			rows = append(rows, row)
			continue
		}
		if st, err := os.Stat(arm); err == nil {
			row.Bytes = st.Size()
		}
		host := filepath.Join(dir, fn, "bootstrap-host")
		if err := goBuild(ctx, root, host, "./functions/"+fn, "", ""); err != nil {
			row.Err = "host build: " + err.Error()
			rows = append(rows, row)
			continue
		}
		var inits []time.Duration
		for range initRuns {
			d, err := initTime(ctx, host, append(fnEnv, "AWS_LAMBDA_FUNCTION_NAME="+fn))
			if err != nil {
				row.Err = err.Error()
				break
			}
			inits = append(inits, d)
		}
		if len(inits) == initRuns {
			sort.Slice(inits, func(i, j int) bool { return inits[i] < inits[j] })
			row.Init = inits[initRuns/2]
		}
		rows = append(rows, row)
	}
	return rows
}

func goBuild(ctx context.Context, root, out, pkg, goos, goarch string) error {
	args := append(append([]string{}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if goos != "" {
		cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH="+goarch)
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(string(msg)))
	}
	return nil
}

// initTime starts bin against a Runtime API stand-in and returns the time
// until its first "next invocation" request; an init error report or an
// exit before it is an error.
func initTime(ctx context.Context, bin string, env []string) (time.Duration, error) {
	next := make(chan time.Time, 1)
	initErr := make(chan string, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		select {
		case next <- time.Now():
		default:
		}
		<-r.Context().Done() // no invocation: the process is killed
	})
	mux.HandleFunc("/2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		buf := make([]byte, 512)
		n, _ := r.Body.Read(buf)
		b.Write(buf[:n])
		select {
		case initErr <- b.String():
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(cleanEnv(), append(env, "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String())...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	select {
	case at := <-next:
		return at.Sub(start), nil
	case msg := <-initErr:
		return 0, fmt.Errorf("init error: %s", msg)
	case err := <-exited:
		exited <- err
		return 0, fmt.Errorf("exited before polling for an invocation: %v", err)
	case <-time.After(30 * time.Second):
		return 0, errors.New("no poll for an invocation within 30 s")
	}
}

// cleanEnv is the parent environment without AWS and Lambda settings.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "TASKLEDGER_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
