package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// The watch table is resolved like the other names (flag, then --stack
// output, then environment) and is optional: no command submits a task,
// so a configuration without it still connects.
func TestWatchTableIsOptionalAndResolvedLikeTheTables(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		flag    string
		outputs map[string]string
		env     string
		want    string
	}{
		{name: "unset", want: ""},
		{name: "environment", env: "env-watch", want: "env-watch"},
		{name: "stack output over environment", outputs: map[string]string{OutputWatchTable: "stack-watch"}, env: "env-watch", want: "stack-watch"},
		{name: "flag over stack output", flag: "flag-watch", outputs: map[string]string{OutputWatchTable: "stack-watch"}, want: "flag-watch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"WATCH_TABLE": c.env}
			fake := &fakeStacks{outputs: c.outputs}
			a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, env: func(k string) string { return env[k] },
				cfn: func(aws.Config) stackDescriber { return fake }}
			o := &options{tasksTable: "tasks", reviewTable: "reviews", watchTable: c.flag, endpoint: "http://127.0.0.1:1", region: "us-east-1"}
			if c.outputs != nil {
				o.stack = "taskledger-prod"
			}
			d, err := a.connect(context.Background(), o, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.ledger.Config().WatchTable; got != c.want {
				t.Fatalf("ledger WatchTable = %q, want %q", got, c.want)
			}
		})
	}
}
