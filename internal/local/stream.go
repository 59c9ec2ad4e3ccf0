package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/stream"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/internal/wsgateway"
)

// DefaultStreamAddr is the emulated WebSocket API's address when
// Options.StreamAddr is empty: a free loopback port.
const DefaultStreamAddr = "127.0.0.1:0"

// Verify makes the emulated JWT authorizer a stream.Verifier: the
// WebSocket $connect is authorised by the same checks as the HTTP API.
func (a *JWTAuthorizer) Verify(ctx context.Context, token string) (map[string]string, error) {
	d, err := a.Authorize(ctx, token)
	if err != nil {
		return nil, err
	}
	return d.Claims, nil
}

// startStream serves the emulated WebSocket API ($connect behind the same
// JWT check as /tasks when sign-in is on, subscribe, $disconnect) and its
// @connections endpoint on their own loopback port, has the worker post
// deltas through the same SigV4 client as in AWS, and advertises the URL
// in GET /auth/config.
func (s *Stack) startStream(o Options, authz *JWTAuthorizer, work *worker.Handler, submit *api.Handler, log *slog.Logger, prog *progress) error {
	addr := o.StreamAddr
	if addr == "" {
		addr = DefaultStreamAddr
	}
	if err := loopback(addr); err != nil {
		return fmt.Errorf("local: stream: %w", err)
	}
	if s.Names.ConnectionsTable == "" {
		return errors.New("local: stream: the template has no ConnectionsTable")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("local: stream: listen on %s: %w", addr, err)
	}
	table := &stream.Table{DB: s.DDB, ConnectionsTable: s.Names.ConnectionsTable}
	gw := &stream.Gateway{Table: table, Tasks: s.Ledger.Get, RequireIdentity: authz != nil, Log: log}
	s.StreamGateway = &wsgateway.Server{Handle: gw.Handle, Routes: []string{stream.RouteSubscribe}, Log: log,
		// The page (its own origin, another port) may connect; other
		// web pages in the developer's browser may not.
		OriginPatterns: pageOrigins(s.URL)}
	if authz != nil {
		wa := &stream.Authorizer{Verifier: authz, Log: log}
		s.StreamGateway.Authorize = func(ctx context.Context, r *http.Request) (any, error) {
			sub, err := wa.Authorize(ctx, r.Header.Get("Sec-WebSocket-Protocol"))
			if err != nil {
				return nil, err
			}
			return map[string]any{"sub": sub}, nil
		}
	}
	guard := &opsapi.Handler{Hosts: opsapi.LoopbackHosts(ln.Addr())} // DNS rebinding
	s.wsSrv = &http.Server{Handler: guard.Guard(s.StreamGateway), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		if err := s.wsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("local: stream server stopped", "error", err.Error())
		}
	}()
	s.StreamURL = "ws://" + ln.Addr().String()
	fan := &stream.Fanout{Subs: table, Poster: stream.NewConnectionsClient(s.AWS, "http://"+ln.Addr().String()), Poll: o.StreamPoll, Log: log}
	work.Streams = worker.StreamsFunc(func(ctx context.Context, taskID string, attempt int) worker.StreamAttempt {
		return fan.Begin(ctx, taskID, attempt)
	})
	submit.Auth.StreamURL = s.StreamURL
	prog.printf("stream: WebSocket API on %s (subscribe to a task's streamed reply; docs/streaming.md)", s.StreamURL)
	return nil
}

// pageOrigins are the host patterns of the page's origin.
func pageOrigins(pageURL string) []string {
	host := pageURL[len("http://"):]
	_, port, err := net.SplitHostPort(host)
	if err != nil {
		return []string{host}
	}
	return []string{host, net.JoinHostPort("localhost", port), net.JoinHostPort("127.0.0.1", port)}
}
