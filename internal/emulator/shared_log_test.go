package emulator

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/taskledger/taskledger/internal/awsclient"
)

// Servers started at the same time with one log path (TASKLEDGER_MOTO_LOG
// is one path for every process of `go test ./...`, and for each package's
// first server) are still each their caller's own: a table created in one
// is not in the other.
func TestMotoServersStartedTogetherOnOneLogPathAreEachTheirOwn(t *testing.T) {
	if motoPython() == "" {
		needMoto(t, fmt.Errorf("%w: no python3 with moto for the launcher", ErrMotoUnavailable))
	}
	logPath := filepath.Join(t.TempDir(), "moto.log")
	const n = 2
	ms := make([]*Moto, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms[i], errs[i] = StartMoto(context.Background(), logPath)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(ms[i].Stop)
	}
	ctx := context.Background()
	dbs := make([]*dynamodb.Client, n)
	for i, m := range ms {
		cfg, err := awsclient.Load(ctx, awsclient.Options{Endpoint: m.URL, StaticCredentials: true,
			Region: "us-east-1", MaxAttempts: 1, HTTPClient: awsclient.DefaultHTTPClient()})
		if err != nil {
			t.Fatal(err)
		}
		dbs[i] = awsclient.DynamoDB(cfg)
	}
	createTable(t, dbs[0], "only-in-the-first", false)
	out, err := dbs[1].ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(out.TableNames, "only-in-the-first") {
		t.Fatalf("the second server (%s) holds the first's (%s) table: both callers got one server", ms[1].URL, ms[0].URL)
	}
}
