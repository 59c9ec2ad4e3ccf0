package wsgateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/coder/websocket"
)

// ConnectionsPath is the management API's path prefix.
const ConnectionsPath = "/@connections/"

// Handler is a WebSocket API route integration.
type Handler func(ctx context.Context, req events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error)

// Authorizer runs before $connect; it returns the authorizer context later
// routes see (nil for none) or an error, answered 401 without an upgrade.
type Authorizer func(ctx context.Context, r *http.Request) (any, error)

// Server is the emulated WebSocket API. Its zero value is not usable: set
// Routes (the route keys it knows besides $connect, $disconnect and
// $default) and Handle.
type Server struct {
	Handle Handler
	// Routes are the action values routed by name; anything else goes to
	// $default.
	Routes []string
	// Authorize, when set, is the $connect authorizer.
	Authorize Authorizer
	// OriginPatterns are the browser origins (host patterns, as
	// websocket.AcceptOptions) allowed to connect besides the server's
	// own; a client without an Origin header (not a browser) is allowed.
	OriginPatterns []string
	// Stage is the stage name routes see.
	Stage string
	Log   *slog.Logger

	mu    sync.Mutex
	conns map[string]*websocket.Conn
}

// ServeHTTP serves WebSocket upgrades on any path but the management
// API's, and POST /@connections/{id}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, ConnectionsPath) {
		s.post(w, r)
		return
	}
	s.connect(w, r)
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:]) + "="
}

func (s *Server) request(r *http.Request, route, id string, authorizer any, body string) events.APIGatewayWebsocketProxyRequest {
	req := events.APIGatewayWebsocketProxyRequest{
		Body: body,
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{
			RouteKey: route, ConnectionID: id, Stage: s.Stage, Authorizer: authorizer,
			RequestID: newID(), DomainName: r.Host, APIID: "local",
			EventType: map[string]string{"$connect": "CONNECT", "$disconnect": "DISCONNECT"}[route],
		},
	}
	if req.RequestContext.EventType == "" {
		req.RequestContext.EventType = "MESSAGE"
	}
	if route == "$connect" {
		req.Headers = map[string]string{}
		for k, v := range r.Header {
			req.Headers[k] = strings.Join(v, ", ")
		}
		q := r.URL.Query()
		if len(q) > 0 {
			req.QueryStringParameters = map[string]string{}
			for k := range q {
				req.QueryStringParameters[k] = q.Get(k)
			}
		}
	}
	return req
}

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var authz any
	if s.Authorize != nil {
		a, err := s.Authorize(ctx, r)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"message":"Unauthorized"}`))
			return
		}
		authz = a
	}
	id := newID()
	resp, err := s.Handle(ctx, s.request(r, "$connect", id, authz, ""))
	if err != nil || resp.StatusCode/100 != 2 {
		code := resp.StatusCode
		if err != nil || code == 0 {
			code = http.StatusInternalServerError
		}
		http.Error(w, http.StatusText(code), code)
		return
	}
	opts := &websocket.AcceptOptions{OriginPatterns: s.OriginPatterns}
	if p := resp.Headers["Sec-WebSocket-Protocol"]; p != "" {
		opts.Subprotocols = []string{p}
	}
	c, err := websocket.Accept(w, r, opts)
	if err != nil {
		// Accept answered the client; the connection never opened.
		_, _ = s.Handle(context.WithoutCancel(ctx), s.request(r, "$disconnect", id, authz, ""))
		return
	}
	c.SetReadLimit(64 << 10)
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[string]*websocket.Conn{}
	}
	s.conns[id] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, id)
		s.mu.Unlock()
		_ = c.CloseNow()
		_, _ = s.Handle(context.WithoutCancel(ctx), s.request(r, "$disconnect", id, authz, ""))
	}()
	for {
		typ, body, err := c.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		route := "$default"
		var sel struct {
			Action string `json:"action"`
		}
		if json.Unmarshal(body, &sel) == nil {
			for _, k := range s.Routes {
				if sel.Action == k {
					route = k
				}
			}
		}
		resp, err := s.Handle(ctx, s.request(r, route, id, authz, string(body)))
		if err != nil {
			s.log().WarnContext(ctx, "wsgateway: route failed", "route", route, "error", err.Error())
			_ = c.Write(ctx, websocket.MessageText, []byte(`{"message": "Internal server error"}`))
			continue
		}
		if resp.Body != "" {
			if err := c.Write(ctx, websocket.MessageText, []byte(resp.Body)); err != nil {
				return
			}
		}
	}
}

// post is the management API's PostToConnection.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, ConnectionsPath)
	body, err := io.ReadAll(io.LimitReader(r.Body, 128<<10+1))
	if err != nil || len(body) > 128<<10 {
		http.Error(w, `{"message":"payload too large"}`, http.StatusRequestEntityTooLarge)
		return
	}
	s.mu.Lock()
	c := s.conns[id]
	s.mu.Unlock()
	if c == nil {
		gone(w)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, body); err != nil {
		_ = c.CloseNow()
		gone(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func gone(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusGone)
	_, _ = w.Write([]byte(`{"message":"GoneException"}`))
}

// Connections is the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Drop closes a connection abruptly (no close frame), as a network loss
// would; it reports whether it was open.
func (s *Server) Drop(id string) bool {
	s.mu.Lock()
	c := s.conns[id]
	s.mu.Unlock()
	if c == nil {
		return false
	}
	_ = c.CloseNow()
	return true
}

// CloseAll closes every open connection (each runs its $disconnect).
func (s *Server) CloseAll() {
	s.mu.Lock()
	cs := make([]*websocket.Conn, 0, len(s.conns))
	for _, c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.CloseNow()
	}
}
