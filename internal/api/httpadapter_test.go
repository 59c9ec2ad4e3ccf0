package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestRequestFromHTTP(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "http://127.0.0.1:3000/tasks/t_aaaaaaaaaaaaaaaaaaaaaaaaaa/cancel?x=1&x=2", strings.NewReader(`{"a":1}`))
	r.RemoteAddr = "127.0.0.1:54321"
	r.Header.Set("Idempotency-Key", "K")
	r.Header.Set("User-Agent", "ua")
	r.Header.Add("X-Multi", "a")
	r.Header.Add("X-Multi", "b")
	ev, err := api.RequestFromHTTP(r, api.MaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Version != "2.0" || ev.RouteKey != "POST /tasks/{id}/cancel" || ev.RequestContext.RouteKey != ev.RouteKey ||
		ev.RawPath != "/tasks/t_aaaaaaaaaaaaaaaaaaaaaaaaaa/cancel" || ev.RawQueryString != "x=1&x=2" ||
		ev.PathParameters["id"] != "t_aaaaaaaaaaaaaaaaaaaaaaaaaa" || ev.QueryStringParameters["x"] != "1,2" ||
		ev.Headers["idempotency-key"] != "K" || ev.Headers["x-multi"] != "a,b" || ev.Headers["host"] != "127.0.0.1:3000" ||
		ev.RequestContext.HTTP.Method != "POST" || ev.RequestContext.HTTP.SourceIP != "127.0.0.1" || ev.RequestContext.HTTP.UserAgent != "ua" ||
		ev.RequestContext.Stage != "$default" || ev.RequestContext.Authorizer != nil || ev.Body != `{"a":1}` || ev.IsBase64Encoded {
		t.Fatalf("event %+v", ev)
	}
	for k := range ev.Headers {
		if k != strings.ToLower(k) {
			t.Fatalf("header %q not lower-cased", k)
		}
	}
	// Unknown route and wrong method: $default, no path parameters.
	ev, _ = api.RequestFromHTTP(httptest.NewRequest("DELETE", "/tasks/t_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil), api.MaxBody)
	if ev.RouteKey != "$default" || ev.PathParameters != nil {
		t.Fatalf("DELETE event %+v", ev)
	}
	// Binary bodies are base64-encoded; oversized bodies are cut at cap+1.
	ev, _ = api.RequestFromHTTP(httptest.NewRequest("POST", "/tasks", strings.NewReader("\xff\xfe")), api.MaxBody)
	if !ev.IsBase64Encoded || ev.Body != "//4=" {
		t.Fatalf("binary body %+v", ev)
	}
	ev, _ = api.RequestFromHTTP(httptest.NewRequest("POST", "/tasks", strings.NewReader(strings.Repeat("x", 100))), 10)
	if len(ev.Body) != 11 {
		t.Fatalf("body of %d bytes read, want 11", len(ev.Body))
	}
}

// TestHTTPHandler serves the handler on 127.0.0.1 the way `make run` does.
func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		srv := httptest.NewServer(api.NewHTTPHandler(b.h))
		t.Cleanup(srv.Close)
		do := func(method, path, body string, hdr ...string) (*http.Response, string) {
			t.Helper()
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			return resp, string(out)
		}
		resp, out := do("POST", "/tasks", body(prompt), "Content-Type", "application/json", "Idempotency-Key", "http-1", "Origin", "http://localhost:8080")
		if resp.StatusCode != 202 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:8080" {
			t.Fatalf("POST: %d %v %s", resp.StatusCode, resp.Header, out)
		}
		id := ledger.TaskID(api.Anonymous, "http-1")
		if resp.Header.Get("Location") != "/tasks/"+id {
			t.Fatalf("Location %q", resp.Header.Get("Location"))
		}
		resp, out = do("POST", "/tasks", body(prompt), "Content-Type", "application/json", "Idempotency-Key", "http-1")
		if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %v %s", resp.StatusCode, resp.Header, out)
		}
		resp, out = do("GET", "/tasks/"+id, "")
		var v api.TaskView
		if resp.StatusCode != 200 || json.Unmarshal([]byte(out), &v) != nil || v.TaskID != id {
			t.Fatalf("GET: %d %s", resp.StatusCode, out)
		}
		resp, out = do("POST", "/tasks/"+id+"/regenerate", "", "Idempotency-Key", "http-2")
		if resp.StatusCode != 202 {
			t.Fatalf("regenerate: %d %s", resp.StatusCode, out)
		}
		resp, out = do("POST", "/tasks/"+id+"/cancel", "")
		if resp.StatusCode != 200 || !strings.Contains(out, `"state":"cancelled"`) {
			t.Fatalf("cancel: %d %s", resp.StatusCode, out)
		}
		resp, out = do("GET", "/nowhere", "")
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(out, api.TypeNotFound) {
			t.Fatalf("unknown route: %d %v %s", resp.StatusCode, resp.Header, out)
		}
		resp, out = do("PUT", "/tasks/"+id, "{}")
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, OPTIONS" || !strings.Contains(out, api.TypeMethodNotAllowed) {
			t.Fatalf("wrong method: %d %v %s", resp.StatusCode, resp.Header, out)
		}
		resp, out = do("OPTIONS", "/tasks", "", "Origin", "http://localhost:8080", "Access-Control-Request-Method", "POST")
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Methods") != "GET, POST, OPTIONS" || out != "" {
			t.Fatalf("preflight: %d %v %q", resp.StatusCode, resp.Header, out)
		}
		resp, out = do("POST", "/tasks", `{"kind":"generate","input":{"prompt":"`+strings.Repeat("x", api.MaxBody)+`"}}`,
			"Content-Type", "application/json", "Idempotency-Key", "http-3")
		if resp.StatusCode != 413 || !strings.Contains(out, api.TypeBodyTooLarge) {
			t.Fatalf("oversized: %d %s", resp.StatusCode, out)
		}
	})
}

// TestHTTPAdapterReadsOversizedBodyBeforeAnswering: over a real socket, a
// client sends a 2 MiB body in full and then reads the 413 — the adapter
// has read (and discarded) the body, as API Gateway does up to its 10 MB
// limit, so the client never meets a reset connection, and the same
// connection serves the next request. A declared length over 10 MB is 413
// before any body is sent.
func TestHTTPAdapterReadsOversizedBodyBeforeAnswering(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(api.NewHTTPHandler(&api.Handler{}))
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	big := bytes.Repeat([]byte("x"), 2<<20)
	for round := 0; round < 2; round++ {
		head := fmt.Sprintf("POST /tasks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nIdempotency-Key: big-%d\r\nContent-Length: %d\r\n\r\n",
			srv.Listener.Addr(), round, len(big))
		// Every byte is written before anything is read: without the
		// drain the server would answer after 64 KiB and close, and these
		// writes (or the read below) would fail with a reset.
		if _, err := conn.Write(append([]byte(head), big...)); err != nil {
			t.Fatalf("round %d: writing the body: %v", round, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("round %d: reading the answer: %v", round, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p api.Problem
		if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(b, &p) != nil || p.Type != api.TypeBodyTooLarge {
			t.Fatalf("round %d: %d %v %s, want 413 body-too-large", round, resp.StatusCode, resp.Header, b)
		}
		if resp.Close {
			t.Fatalf("round %d: the server closes the connection after a drained 413", round)
		}
	}

	// Declared over API Gateway's limit: 413 at once, nothing read.
	conn2, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	fmt.Fprintf(conn2, "POST /tasks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", srv.Listener.Addr(), api.APIGatewayMaxPayload+1)
	resp, err := http.ReadResponse(bufio.NewReader(conn2), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("Content-Length over 10 MB: %d, want 413", resp.StatusCode)
	}
}
