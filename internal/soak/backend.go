package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/sivchari/kumo"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/emulator"
	"github.com/taskledger/taskledger/internal/stack"
)

// Env is where a soak runs: a clean AWS configuration (no faults; the
// poller, the checker and the test's own reads use it) and fresh resources
// created from template.yaml.
type Env struct {
	Backend string
	AWS     aws.Config
	Names   stack.Names
}

// Backend is a running emulator (or an external endpoint) on which fresh
// stacks can be created.
type Backend struct {
	Name string
	// AWS is a clean configuration (no faults) for the endpoint.
	AWS  aws.Config
	stop func()
}

// OpenBackend brings up a backend: "kumo" (embedded emulator), "moto"
// (moto on a free loopback port, DynamoDB serialised; see internal/emulator) or "external" (AWS_ENDPOINT_URL, or the default AWS chain).
func OpenBackend(ctx context.Context, name string) (b *Backend, err error) {
	var stop func()
	endpoint := ""
	switch name {
	case "", "kumo":
		name = "kumo"
		srv := kumo.NewServer()
		endpoint, stop = srv.URL, srv.Close
	case "moto":
		m, err := emulator.StartMoto(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("soak: moto backend: %w", err)
		}
		endpoint, stop = m.URL, m.Stop
	case "external":
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
		stop = func() {}
	default:
		return nil, fmt.Errorf("soak: unknown backend %q (kumo, moto or external)", name)
	}
	opts := awsclient.Options{Endpoint: endpoint, HTTPClient: awsclient.DefaultHTTPClient(), MaxAttempts: 3}
	if name != "external" {
		opts.StaticCredentials, opts.Region = true, "us-east-1"
	}
	cfg, err := awsclient.Load(ctx, opts)
	if err != nil {
		stop()
		return nil, err
	}
	return &Backend{Name: name, AWS: cfg, stop: stop}, nil
}

// Endpoint returns the backend's endpoint URL ("" for the default chain).
func (b *Backend) Endpoint() string { return aws.ToString(b.AWS.BaseEndpoint) }

// Close stops what OpenBackend started (nothing for a Backend built from an
// existing configuration).
func (b *Backend) Close() {
	if b.stop != nil {
		b.stop()
	}
}

// NewEnv creates a fresh stack from template.yaml, named with prefix and a
// random suffix; drop deletes it.
func (b *Backend) NewEnv(ctx context.Context, prefix string) (env *Env, drop func(), err error) {
	ddb, sq := awsclient.DynamoDB(b.AWS), awsclient.SQS(b.AWS)
	tpl := stack.MustLoadDefault()
	var r [3]byte
	_, _ = rand.Read(r[:])
	full := prefix + hex.EncodeToString(r[:])
	names, err := tpl.Create(ctx, ddb, sq, full, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("soak: create resources on %s: %w", b.Name, err)
	}
	s3c := awsclient.S3(b.AWS)
	if err := tpl.CreateBuckets(ctx, s3c, full, &names, nil); err != nil {
		_ = tpl.Delete(ctx, ddb, sq, names)
		return nil, nil, fmt.Errorf("soak: create the payload bucket on %s: %w", b.Name, err)
	}
	return &Env{Backend: b.Name, AWS: b.AWS, Names: names}, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = tpl.Delete(cctx, ddb, sq, names)
		_ = tpl.DeleteBuckets(cctx, s3c, names)
	}, nil
}

// StartBackend opens a backend and creates one fresh stack on it; close
// deletes the stack and stops the backend.
func StartBackend(ctx context.Context, name string) (env *Env, close func(), err error) {
	b, err := OpenBackend(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	env, drop, err := b.NewEnv(ctx, "soak")
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return env, func() { drop(); b.Close() }, nil
}
