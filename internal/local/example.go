package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/lambdarie"
	"github.com/taskledger/taskledger/internal/stack"
)

// ExampleFunction is the lambda destination's name for the example
// function make run starts (as deployed: lambdaenv.ExampleFunction).
const ExampleFunction = "example"

// ExampleDestination is the example receiving function
// (functions/exampledestination) running under aws-lambda-rie.
type ExampleDestination struct {
	// URL is its Invoke API: Options.LambdaEndpoint.
	URL string
	// InvokeURL is the function's invocation URL (for curl).
	InvokeURL string

	proc *lambdarie.Process
	dir  string
}

// StartExampleDestination builds functions/exampledestination as deployed,
// runs it under aws-lambda-rie (built once into the user's cache directory,
// or $TASKLEDGER_RIE) with its records in memory, and returns it. Register
// it with Register and stop it with Stop. progress gets one line per step.
func StartExampleDestination(ctx context.Context, progress func(string)) (*ExampleDestination, error) {
	if progress == nil {
		progress = func(string) {}
	}
	tpl, err := stack.Find()
	if err != nil {
		return nil, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	gobin := filepath.Join(cache, "taskledger", "rie-"+lambdarie.Version)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	progress("example destination: building aws-lambda-rie and functions/exampledestination…")
	rie, err := lambdarie.Install(ctx, gobin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "taskledger-example-*")
	if err != nil {
		return nil, err
	}
	bootstrap, err := lambdarie.Build(ctx, filepath.Dir(tpl), "./functions/exampledestination", dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p, err := lambdarie.Start(ctx, rie, bootstrap, lambdarie.Function{Name: "ExampleDestinationFunction", Timeout: 10 * time.Second,
		Env: map[string]string{"LOG_LEVEL": "warn"}}, nil)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	progress(fmt.Sprintf("example destination: functions/exampledestination under aws-lambda-rie at %s", p.URL))
	return &ExampleDestination{URL: p.URL, InvokeURL: p.InvokeURL, proc: p, dir: dir}, nil
}

// Register adds the example as the lambda destination's function
// "example" (with its lookup: its records are read back consistently)
// unless c already names one.
func (e *ExampleDestination) Register(c *deliver.Config) {
	if c.Lambda == nil {
		c.Lambda = &deliver.LambdaConfig{}
	}
	if c.Lambda.Functions == nil {
		c.Lambda.Functions = map[string]deliver.LambdaFunction{}
	}
	if _, named := c.Lambda.Functions[ExampleFunction]; !named {
		c.Lambda.Functions[ExampleFunction] = deliver.LambdaFunction{Function: lambdarie.FunctionName, Lookup: true, NotFoundCredible: true, Timeout: "10s"}
	}
}

// Stop ends the function and removes its build.
func (e *ExampleDestination) Stop() {
	e.proc.Stop()
	_ = os.RemoveAll(e.dir)
}
