package templatetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/metrics"
)

// pendingMetrics are taskledger metrics the dashboard and alarms may name
// before the code emits them (the spend metrics of spend control's
// budget/quota work, DESIGN §13): QuotaExceeded (a submit refused 429 over
// its caller's daily quota) and BudgetExhausted (a task parked on its
// token or cost budget). They are read only through Metrics Insights queries (SUM over
// every dimension), so their dimensions do not matter.
var pendingMetrics = map[string]bool{"QuotaExceeded": true, "BudgetExhausted": true}

// metricRef is a taskledger metric named by the template: its name and
// its dimension names (sorted, comma joined; "*" for a Metrics Insights
// query over every dimension).
type metricRef struct{ name, dims string }

// emitted maps each metric the code writes to the dimension sets it is
// written with, found statically (non-test files of the module): a Set or
// Add on a Record(...) with constant dimension names — chained, or through
// a variable assigned from it — of a constant metric name, or of
// metricName(v) with v ranging over a list of constants, literal or a
// package-level var (the worker's outcomes).
func emitted(t *testing.T) map[string]map[string]bool {
	t.Helper()
	root := moduleRoot(t)
	out := map[string]map[string]bool{}
	add := func(metric, dims string) {
		if out[metric] == nil {
			out[metric] = map[string]bool{}
		}
		out[metric][dims] = true
	}
	pkgs := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lit := func(e ast.Expr) (string, bool) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			s, err := strconv.Unquote(b.Value)
			return s, err == nil
		}
		return "", false
	}
	for _, files := range pkgs {
		consts := map[string]string{}
		for _, f := range files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := lit(vs.Values[i]); ok {
								consts[n.Name] = s
							}
						}
					}
				}
			}
		}
		// Package-level lists (var x = []string{...}) a range may name.
		lists := map[string]*ast.CompositeLit{}
		for _, f := range files {
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, sp := range g.Specs {
						vs := sp.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								if cl, ok := vs.Values[i].(*ast.CompositeLit); ok {
									lists[n.Name] = cl
								}
							}
						}
					}
				}
			}
		}
		for _, f := range files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				vars := map[string]string{}     // variable -> dims of the Record it holds
				ranges := map[string][]string{} // range variable -> constant values
				// recordDims follows a chain (x.Record(...).Set(...)...) or a
				// variable back to its Record call.
				var recordDims func(e ast.Expr) (string, bool)
				recordDims = func(e ast.Expr) (string, bool) {
					switch e := e.(type) {
					case *ast.Ident:
						d, ok := vars[e.Name]
						return d, ok
					case *ast.CallExpr:
						s, ok := e.Fun.(*ast.SelectorExpr)
						if !ok {
							return "", false
						}
						if s.Sel.Name != "Record" {
							return recordDims(s.X)
						}
						var dims []string
						for i := 0; i < len(e.Args); i += 2 {
							name, ok := lit(e.Args[i])
							if !ok {
								return "", false
							}
							dims = append(dims, name)
						}
						slices.Sort(dims)
						return strings.Join(dims, ","), true
					}
					return "", false
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.AssignStmt:
						if len(n.Lhs) == 1 && len(n.Rhs) == 1 {
							if id, ok := n.Lhs[0].(*ast.Ident); ok {
								if d, ok := recordDims(n.Rhs[0]); ok {
									vars[id.Name] = d
								}
							}
						}
					case *ast.RangeStmt:
						v, _ := n.Value.(*ast.Ident)
						cl, _ := n.X.(*ast.CompositeLit)
						if id, ok := n.X.(*ast.Ident); ok {
							cl = lists[id.Name]
						}
						if v == nil || cl == nil {
							return true
						}
						for _, e := range cl.Elts {
							if id, ok := e.(*ast.Ident); ok && consts[id.Name] != "" {
								ranges[v.Name] = append(ranges[v.Name], consts[id.Name])
							}
						}
					case *ast.CallExpr:
						s, ok := n.Fun.(*ast.SelectorExpr)
						if !ok || len(n.Args) == 0 || (s.Sel.Name != "Set" && s.Sel.Name != "Add") {
							return true
						}
						dims, ok := recordDims(s.X)
						if !ok {
							return true
						}
						if name, ok := lit(n.Args[0]); ok {
							add(name, dims)
						} else if c, ok := n.Args[0].(*ast.CallExpr); ok && len(c.Args) == 1 {
							if f, ok := c.Fun.(*ast.Ident); ok && f.Name == "metricName" {
								if v, ok := c.Args[0].(*ast.Ident); ok {
									for _, o := range ranges[v.Name] {
										add(camel(o), dims)
									}
								}
							}
						}
					}
					return true
				})
			}
		}
	}
	return out
}

// camel is the worker's metricName: "acked_duplicate" -> "AckedDuplicate".
func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

var (
	searchRe  = regexp.MustCompile(`^SEARCH\('\{([^}]*)\} MetricName="(\w+)"'`)
	insightRe = regexp.MustCompile(`^SELECT (?:SUM|AVG|MAX|MIN|COUNT)\((\w+)\) FROM (\w+)$`)
	subVarRe  = regexp.MustCompile(`\$\{([^}]+)\}`)
)

// expressionRef reads the taskledger metric of a SEARCH or Metrics
// Insights expression; ok=false for any other expression.
func expressionRef(expr string) (metricRef, bool, error) {
	if m := searchRe.FindStringSubmatch(expr); m != nil {
		schema := strings.Split(m[1], ",")
		if schema[0] != metrics.Namespace {
			return metricRef{}, false, nil
		}
		dims := append([]string{}, schema[1:]...)
		slices.Sort(dims)
		return metricRef{m[2], strings.Join(dims, ",")}, true, nil
	}
	if m := insightRe.FindStringSubmatch(expr); m != nil {
		if m[2] != metrics.Namespace {
			return metricRef{}, false, nil
		}
		return metricRef{m[1], "*"}, true, nil
	}
	return metricRef{}, false, fmt.Errorf("expression %q is neither a SEARCH nor a Metrics Insights query", expr)
}

// dashboardRefs parses a DashboardBody (its Fn::Sub variables replaced by
// placeholders) and returns the taskledger metrics it names.
func dashboardRefs(body string) ([]metricRef, error) {
	body = subVarRe.ReplaceAllString(body, "sub-var")
	var d struct {
		Widgets []struct {
			Type       string `json:"type"`
			Width      int    `json:"width"`
			Height     int    `json:"height"`
			Properties struct {
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return nil, err
	}
	if len(d.Widgets) == 0 {
		return nil, errors.New("no widgets")
	}
	var refs []metricRef
	for _, w := range d.Widgets {
		if w.Width < 1 || w.Width > 24 || w.Height < 1 {
			return nil, fmt.Errorf("widget %s has no size (width 1..24, height >= 1)", w.Type)
		}
		for _, row := range w.Properties.Metrics {
			if len(row) == 0 {
				continue
			}
			if o, ok := row[0].(map[string]any); ok {
				expr, _ := o["expression"].(string)
				r, ok, err := expressionRef(expr)
				if err != nil {
					return nil, err
				}
				if ok {
					refs = append(refs, r)
				}
				continue
			}
			ns, _ := row[0].(string)
			if ns == "." || len(row) < 2 {
				return nil, errors.New(`write every metric row in full (no "." shorthand)`)
			}
			if ns != metrics.Namespace {
				continue
			}
			name, _ := row[1].(string)
			var dims []string
			for i := 2; i+1 < len(row); i += 2 {
				k, ok := row[i].(string)
				if !ok {
					break
				}
				dims = append(dims, k)
			}
			slices.Sort(dims)
			refs = append(refs, metricRef{name, strings.Join(dims, ",")})
		}
	}
	return refs, nil
}

// checkRefs returns a problem for each reference the code does not emit
// (pending metrics are accepted through a Metrics Insights query only).
func checkRefs(refs []metricRef, emits map[string]map[string]bool) []string {
	var bad []string
	for _, r := range refs {
		switch {
		case r.dims == "*" && (pendingMetrics[r.name] || len(emits[r.name]) > 0):
		case emits[r.name][r.dims]:
		default:
			bad = append(bad, r.name+" {"+r.dims+"}")
		}
	}
	return bad
}

// TestDashboard: the dashboard's body is valid JSON with sized widgets,
// shows the Overview tab's figures, and names only metrics the code emits
// (with the dimensions it emits them with) or the two pending spend
// metrics; the spend alarms query those two.
func TestDashboard(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	ids := tpl.LogicalIDs("AWS::CloudWatch::Dashboard")
	if len(ids) != 1 {
		t.Fatalf("dashboards: %v, want one", ids)
	}
	p, _ := tpl.Resource(ids[0])
	sub, _ := p["DashboardBody"].(map[string]any)
	body, ok := sub["Fn::Sub"].(string)
	if !ok {
		t.Fatalf("DashboardBody = %v, want an Fn::Sub string", p["DashboardBody"])
	}
	for _, m := range subVarRe.FindAllStringSubmatch(body, -1) {
		name, _, _ := strings.Cut(m[1], ".")
		if _, ok := tpl.ResourceEntry(name); !ok && name != "Provider" && !strings.HasPrefix(name, "AWS::") {
			t.Errorf("DashboardBody names ${%s}: no such resource or parameter", m[1])
		}
	}
	refs, err := dashboardRefs(body)
	if err != nil {
		t.Fatalf("DashboardBody: %v", err)
	}
	emits := emitted(t)
	// The scan itself finds what the dashboard relies on (else it proves nothing).
	for _, want := range []metricRef{{"LiveTasks", "Function,State"}, {"Completed", "Service"}, {"ProviderCalls", "Provider,Service"}, {"OpenReviews", "Function,Reason"}} {
		if !emits[want.name][want.dims] {
			t.Errorf("the code scan does not find %s {%s}; found %v", want.name, want.dims, emits[want.name])
		}
	}
	if bad := checkRefs([]metricRef{{"NoSuchMetric", "Service"}, {"Completed", "Function"}, {"LiveTasks", "*"}}, emits); len(bad) != 2 {
		t.Errorf("checkRefs accepts what the code does not emit: flagged only %v", bad)
	}
	if bad := checkRefs(refs, emits); len(bad) > 0 {
		t.Errorf("the dashboard names metrics the code does not emit: %v", bad)
	}
	// The Overview tab's figures are all there.
	for _, want := range []metricRef{
		{"LiveTasks", "Function,State"}, {"OldestTaskAge", "Function,State"}, {"Completed", "Service"}, {"Failed", "Service"},
		{"OpenReviews", "Function,Reason"}, {"QuotaExceeded", "*"}, {"BudgetExhausted", "*"},
	} {
		if !slices.Contains(refs, want) {
			t.Errorf("the dashboard does not show %s {%s}", want.name, want.dims)
		}
	}

	// The spend alarms: a Metrics Insights SUM of the pending metric over 5
	// minutes, a parameter threshold, actions only with AlarmEmail.
	actions := map[string]any{"Fn::If": []any{"HasAlarmEmail", []any{map[string]any{"Ref": "AlarmTopic"}}, map[string]any{"Ref": "AWS::NoValue"}}}
	for id, want := range map[string]string{"QuotaExceededAlarm": "QuotaExceeded", "BudgetExhaustedAlarm": "BudgetExhausted"} {
		a, ok := tpl.Resource(id)
		if !ok {
			t.Errorf("no %s", id)
			continue
		}
		qs, _ := a["Metrics"].([]any)
		if len(qs) != 1 {
			t.Errorf("%s: Metrics = %v, want one query", id, a["Metrics"])
			continue
		}
		q, _ := qs[0].(map[string]any)
		r, ok, err := expressionRef(q["Expression"].(string))
		if err != nil || !ok || r != (metricRef{want, "*"}) || q["Period"] != 300 {
			t.Errorf("%s: query %v, want SELECT SUM(%s) FROM taskledger over 300 s", id, q, want)
		}
		if ref(a["Threshold"]) != want+"AlarmPer5Min" || a["ComparisonOperator"] != "GreaterThanThreshold" {
			t.Errorf("%s: threshold %v %v, want > Ref %sAlarmPer5Min", id, a["ComparisonOperator"], a["Threshold"], want)
		}
		if !reflect.DeepEqual(a["AlarmActions"], actions) || !reflect.DeepEqual(a["OKActions"], actions) {
			t.Errorf("%s: actions %v / %v", id, a["AlarmActions"], a["OKActions"])
		}
	}

	// A call over its bound alarms on the first one: it is the bound
	// failing, not a rate to tolerate.
	if a, ok := tpl.Resource("BoundExceededAlarm"); !ok {
		t.Error("no BoundExceededAlarm")
	} else {
		qs, _ := a["Metrics"].([]any)
		var q map[string]any
		if len(qs) == 1 {
			q, _ = qs[0].(map[string]any)
		}
		expr, _ := q["Expression"].(string)
		r, ok, err := expressionRef(expr)
		if err != nil || !ok || r != (metricRef{"BoundExceeded", "*"}) || q["Period"] != 300 {
			t.Errorf("BoundExceededAlarm: query %v, want SELECT SUM(BoundExceeded) FROM taskledger over 300 s", a["Metrics"])
		}
		if a["Threshold"] != 0 || a["ComparisonOperator"] != "GreaterThanThreshold" {
			t.Errorf("BoundExceededAlarm: %v %v, want > 0", a["ComparisonOperator"], a["Threshold"])
		}
		if !reflect.DeepEqual(a["AlarmActions"], actions) || !reflect.DeepEqual(a["OKActions"], actions) {
			t.Errorf("BoundExceededAlarm: actions %v / %v", a["AlarmActions"], a["OKActions"])
		}
	}
}
