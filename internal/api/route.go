package api

import (
	"net/http"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

type routeID int

const (
	routeTasks routeID = iota + 1
	routeTask
	routeRegenerate
	routeCancel
	routeApprove
	routeReject
	routeWithdraw
	routeUploads
	routeConversation
	routeListTasks
	routeApprovals
)

// Route templates, as API Gateway route keys name them.
var routePaths = map[routeID]string{
	routeTasks:      "/tasks",
	routeTask:       "/tasks/{id}",
	routeRegenerate: "/tasks/{id}/regenerate",
	routeCancel:     "/tasks/{id}/cancel",
	routeApprove:    "/tasks/{id}/approve",
	routeReject:     "/tasks/{id}/reject",
	routeWithdraw:   "/tasks/{id}/withdraw",
	routeUploads:    "/uploads",
	// conversation.go; the {id} is a conversation id, not a task id.
	routeConversation: "/conversations/{id}",
	routeListTasks:    "/tasks",
	routeApprovals:    "/approvals",
}

// routeMethods are the methods each path serves (besides OPTIONS).
var routeMethods = map[routeID]string{
	routeTasks:        http.MethodPost,
	routeTask:         http.MethodGet,
	routeRegenerate:   http.MethodPost,
	routeCancel:       http.MethodPost,
	routeApprove:      http.MethodPost,
	routeReject:       http.MethodPost,
	routeWithdraw:     http.MethodPost,
	routeUploads:      http.MethodPost,
	routeListTasks:    http.MethodGet,
	routeApprovals:    http.MethodGet,
	routeConversation: http.MethodGet,
}

func (id routeID) template() string { return routePaths[id] }
func (id routeID) method() string   { return routeMethods[id] }

// RouteKey is the API Gateway route key of the route serving the request
// (e.g. "POST /tasks/{id}/cancel"), or "" when no route matches.
func (id routeID) routeKey() string { return id.method() + " " + id.template() }

// route is a matched request path.
type route struct {
	id     routeID
	taskID string
	// prefix is what precedes /tasks in the raw path (a stage name or a
	// custom domain's base path), kept for Location.
	prefix string
}

// forMethod is the route of r's path that serves method (GET /tasks
// lists, POST /tasks submits).
func (r route) forMethod(method string) (route, bool) {
	for id, tpl := range routePaths {
		if tpl == r.id.template() && id.method() == method {
			r.id = id
			return r, true
		}
	}
	return r, false
}

func (r route) allows(method string) bool { _, ok := r.forMethod(method); return ok }

// allowed are the methods r's path serves, sorted, and OPTIONS.
func (r route) allowed() []string {
	var ms []string
	for id, tpl := range routePaths {
		if tpl == r.id.template() {
			ms = append(ms, id.method())
		}
	}
	sort.Strings(ms)
	return append(ms, http.MethodOptions)
}

// matchRoute finds the route of req. A route key API Gateway matched
// (e.g. "GET /tasks/{id}") is trusted with its path parameter; otherwise
// ($default, local runs) the raw path is matched, less a named stage.
func matchRoute(req *events.APIGatewayV2HTTPRequest) (route, bool) {
	for id, tpl := range routePaths {
		if req.RouteKey == id.routeKey() {
			r := route{id: id, taskID: req.PathParameters["id"]}
			if strings.Contains(tpl, "{id}") && r.taskID == "" {
				break
			}
			canonical := strings.Replace(tpl, "{id}", r.taskID, 1)
			if p, ok := strings.CutSuffix(req.RawPath, canonical); ok {
				r.prefix = p
			}
			return r, true
		}
	}
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	prefix := ""
	if st := req.RequestContext.Stage; st != "" && st != "$default" && strings.HasPrefix(path, "/"+st+"/") {
		prefix = "/" + st
		path = path[len(prefix):]
	}
	if path == "/uploads" {
		return route{id: routeUploads, prefix: prefix}, true
	}
	if id, ok := strings.CutPrefix(path, "/conversations/"); ok && id != "" && !strings.Contains(id, "/") {
		return route{id: routeConversation, taskID: id, prefix: prefix}, true
	}
	if path == "/approvals" {
		return route{id: routeApprovals, prefix: prefix}, true
	}
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if !strings.HasPrefix(path, "/") || seg[0] != "tasks" {
		return route{}, false
	}
	switch {
	case len(seg) == 1:
		return route{id: routeTasks, prefix: prefix}, true
	case len(seg) == 2 && seg[1] != "":
		return route{id: routeTask, taskID: seg[1], prefix: prefix}, true
	case len(seg) == 3 && seg[1] != "" && seg[2] == "regenerate":
		return route{id: routeRegenerate, taskID: seg[1], prefix: prefix}, true
	case len(seg) == 3 && seg[1] != "" && seg[2] == "cancel":
		return route{id: routeCancel, taskID: seg[1], prefix: prefix}, true
	case len(seg) == 3 && seg[1] != "" && decisionRoutes[seg[2]] != 0:
		return route{id: decisionRoutes[seg[2]], taskID: seg[1], prefix: prefix}, true
	}
	return route{}, false
}

// requestMethod is the request's HTTP method (from the route key when the
// request context lacks it).
func requestMethod(req *events.APIGatewayV2HTTPRequest) string {
	if m := req.RequestContext.HTTP.Method; m != "" {
		return strings.ToUpper(m)
	}
	if m, _, ok := strings.Cut(req.RouteKey, " "); ok {
		return strings.ToUpper(m)
	}
	return ""
}

// decisionRoutes are the approval decisions on /tasks/{id}/<decision>.
var decisionRoutes = map[string]routeID{"approve": routeApprove, "reject": routeReject, "withdraw": routeWithdraw}
