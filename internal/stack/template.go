package stack

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Resource types this package knows about.
const (
	typeTable    = "AWS::DynamoDB::Table"
	typeQueue    = "AWS::SQS::Queue"
	typeBucket   = "AWS::S3::Bucket"
	typeFunction = "AWS::Serverless::Function"
)

// SAM and SQS defaults used when the template leaves a property out.
const (
	defaultFunctionTimeout   = 3 * time.Second
	defaultFunctionMemory    = 128
	defaultSQSBatchSize      = 10
	defaultVisibilityTimeout = 30 * time.Second
)

// Template is a parsed template.yaml: plain maps and lists with every
// short-form tag in its long form (see the package documentation).
type Template struct {
	path      string
	doc       map[string]any
	resources map[string]resource
}

type resource struct {
	Type       string
	Properties map[string]any
	DependsOn  []string
	// Condition names the template condition the resource is created
	// under ("" for always).
	Condition string
}

// Load reads and parses a SAM/CloudFormation template.
func Load(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("stack: load template: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("stack: parse %s: %w", path, err)
	}
	t.path = path
	return t, nil
}

func parse(data []byte) (*Template, error) {
	v, err := parseYAML(data)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("template is not a mapping")
	}
	rs, ok := doc["Resources"].(map[string]any)
	if !ok || len(rs) == 0 {
		return nil, errors.New("template has no Resources")
	}
	t := &Template{doc: doc, resources: make(map[string]resource, len(rs))}
	for id, raw := range rs {
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("resource %s is not a mapping", id)
		}
		typ, _ := m["Type"].(string)
		if typ == "" {
			return nil, fmt.Errorf("resource %s has no Type", id)
		}
		props, _ := m["Properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
		}
		r := resource{Type: typ, Properties: props}
		r.Condition, _ = m["Condition"].(string)
		switch d := m["DependsOn"].(type) {
		case string:
			r.DependsOn = []string{d}
		case []any:
			for _, x := range d {
				if s, ok := x.(string); ok {
					r.DependsOn = append(r.DependsOn, s)
				}
			}
		}
		t.resources[id] = r
	}
	return t, nil
}

// Path is the file the template was loaded from ("" if parsed from memory).
func (t *Template) Path() string { return t.path }

// templateEnv overrides Find's search.
const templateEnv = "TASKLEDGER_TEMPLATE"

// Find returns the path of template.yaml: $TASKLEDGER_TEMPLATE if set,
// otherwise template.yaml in the nearest directory at or above the working
// directory that holds go.mod.
func Find() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("stack: find template: %w", err)
	}
	return findFrom(wd, os.Getenv(templateEnv))
}

func findFrom(dir, override string) (string, error) {
	if override != "" {
		if _, err := os.Stat(override); err != nil {
			return "", fmt.Errorf("stack: %s: %w", templateEnv, err)
		}
		return override, nil
	}
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p := filepath.Join(d, "template.yaml")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("stack: module root %s has no template.yaml: %w", d, err)
			}
			return p, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("stack: no go.mod at or above %s (set %s)", dir, templateEnv)
		}
		d = parent
	}
}

// MustLoadDefault is Find followed by Load, for tests and tools. It panics
// with a message saying what was looked for and where.
func MustLoadDefault() *Template {
	p, err := Find()
	if err != nil {
		panic(fmt.Sprintf("stack.MustLoadDefault: %v", err))
	}
	t, err := Load(p)
	if err != nil {
		panic(fmt.Sprintf("stack.MustLoadDefault: %v", err))
	}
	return t
}

// Resource returns a deep copy of a resource's Properties (long-form
// intrinsics, unevaluated).
func (t *Template) Resource(logicalID string) (map[string]any, bool) {
	r, ok := t.resources[logicalID]
	if !ok {
		return nil, false
	}
	return deepCopy(r.Properties).(map[string]any), true
}

// Section returns a deep copy of a top-level section of the template
// ("Parameters", "Rules", "Conditions", "Outputs"; long-form intrinsics,
// unevaluated), or nil when the template has none.
func (t *Template) Section(name string) map[string]any {
	m, _ := t.doc[name].(map[string]any)
	if m == nil {
		return nil
	}
	return deepCopy(m).(map[string]any)
}

// ResourceEntry returns a deep copy of a resource's whole entry (Type,
// Properties, Condition, DeletionPolicy, ...), or false.
func (t *Template) ResourceEntry(logicalID string) (map[string]any, bool) {
	rs, _ := t.doc["Resources"].(map[string]any)
	m, ok := rs[logicalID].(map[string]any)
	if !ok {
		return nil, false
	}
	return deepCopy(m).(map[string]any), true
}

// ResourceType returns a resource's Type ("" if there is no such resource).
func (t *Template) ResourceType(logicalID string) string {
	return t.resources[logicalID].Type
}

// LogicalIDs returns the logical ids of the resources of the given type,
// sorted; all resources if typ is "".
func (t *Template) LogicalIDs(typ string) []string {
	var ids []string
	for id, r := range t.resources {
		if typ == "" || r.Type == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// QueueVisibilityTimeout returns an AWS::SQS::Queue's VisibilityTimeout (the
// SQS default, 30 s, if the template leaves it out), or 0 if logicalID is not
// a queue or the value is not a literal number.
func (t *Template) QueueVisibilityTimeout(logicalID string) time.Duration {
	r, ok := t.resources[logicalID]
	if !ok || r.Type != typeQueue {
		return 0
	}
	v, ok := r.Properties["VisibilityTimeout"]
	if !ok {
		return defaultVisibilityTimeout
	}
	n, ok := toInt(v)
	if !ok {
		return 0
	}
	return time.Duration(n) * time.Second
}

// Function is an AWS::Serverless::Function with Globals.Function merged in.
// Env and Policies are raw template values (long-form intrinsics).
type Function struct {
	LogicalID     string
	Timeout       time.Duration
	MemorySize    int
	Env           map[string]any
	Policies      []any
	Architectures []string
	Runtime       string
}

// Functions returns every AWS::Serverless::Function by logical id, with
// Globals.Function merged in as SAM merges it (maps merged, lists appended
// to the global list, scalars overridden) and SAM's defaults for Timeout
// (3 s), MemorySize (128) and Architectures ([x86_64]).
func (t *Template) Functions() map[string]Function {
	out := map[string]Function{}
	for _, id := range t.LogicalIDs(typeFunction) {
		p := t.functionProperties(id)
		f := Function{
			LogicalID:     id,
			Timeout:       defaultFunctionTimeout,
			MemorySize:    defaultFunctionMemory,
			Env:           map[string]any{},
			Architectures: []string{"x86_64"},
		}
		if n, ok := toInt(p["Timeout"]); ok {
			f.Timeout = time.Duration(n) * time.Second
		}
		if n, ok := toInt(p["MemorySize"]); ok {
			f.MemorySize = n
		}
		f.Runtime, _ = p["Runtime"].(string)
		if env, ok := p["Environment"].(map[string]any); ok {
			if vars, ok := env["Variables"].(map[string]any); ok {
				f.Env = vars
			}
		}
		switch ps := p["Policies"].(type) {
		case []any:
			f.Policies = ps
		case nil:
		default: // a single policy name or document
			f.Policies = []any{ps}
		}
		if as, ok := p["Architectures"].([]any); ok {
			f.Architectures = f.Architectures[:0]
			for _, a := range as {
				f.Architectures = append(f.Architectures, fmt.Sprint(a))
			}
		}
		out[id] = f
	}
	return out
}

// functionProperties merges Globals.Function into a function's Properties.
func (t *Template) functionProperties(id string) map[string]any {
	props := deepCopy(t.resources[id].Properties).(map[string]any)
	globals, _ := t.doc["Globals"].(map[string]any)
	g, _ := globals["Function"].(map[string]any)
	if g == nil {
		return props
	}
	return mergeGlobals(deepCopy(g), props).(map[string]any)
}

// mergeGlobals implements SAM's Globals rules: maps are merged key by key,
// lists are the global entries followed by the resource's, and any other
// value (or a type mismatch, or an intrinsic) is taken from the resource.
func mergeGlobals(global, local any) any {
	switch l := local.(type) {
	case map[string]any:
		g, ok := global.(map[string]any)
		if !ok || isIntrinsic(l) || isIntrinsic(g) {
			return l
		}
		out := maps.Clone(g)
		for k, v := range l {
			if gv, ok := g[k]; ok {
				out[k] = mergeGlobals(gv, v)
			} else {
				out[k] = v
			}
		}
		return out
	case []any:
		if g, ok := global.([]any); ok {
			return append(slices.Clip(g), l...)
		}
		return l
	}
	return local
}

// isIntrinsic reports whether m is a single-key intrinsic function call.
func isIntrinsic(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::")
	}
	return false
}

// EventSourceMapping is an SQS event of a function (SAM "Type: SQS").
type EventSourceMapping struct {
	Function                string
	Queue                   string // logical id of the queue (or the literal ARN)
	BatchSize               int
	MaxBatchingWindow       time.Duration
	ReportBatchItemFailures bool
	MaxConcurrency          int // 0: no limit
}

// SQSEvents returns the SQS event source mappings, ordered by function and
// event name.
func (t *Template) SQSEvents() []EventSourceMapping {
	var out []EventSourceMapping
	for _, ev := range t.events("SQS") {
		p := ev.props
		m := EventSourceMapping{
			Function:  ev.function,
			Queue:     refTarget(p["Queue"]),
			BatchSize: defaultSQSBatchSize,
		}
		if n, ok := toInt(p["BatchSize"]); ok {
			m.BatchSize = n
		}
		if n, ok := toInt(p["MaximumBatchingWindowInSeconds"]); ok {
			m.MaxBatchingWindow = time.Duration(n) * time.Second
		}
		if rts, ok := p["FunctionResponseTypes"].([]any); ok {
			m.ReportBatchItemFailures = slices.Contains(rts, any("ReportBatchItemFailures"))
		}
		if sc, ok := p["ScalingConfig"].(map[string]any); ok {
			m.MaxConcurrency, _ = toInt(sc["MaximumConcurrency"])
		}
		out = append(out, m)
	}
	return out
}

// Schedule is a Schedule (EventBridge rule) or ScheduleV2 (EventBridge
// Scheduler) event of a function. Every is the period of a rate(...)
// expression, 0 for cron(...) and at(...).
type Schedule struct {
	Function   string
	Expression string
	Every      time.Duration
}

// Schedules returns the schedule events, ordered by function and event name.
func (t *Template) Schedules() []Schedule {
	var out []Schedule
	for _, ev := range t.events("Schedule", "ScheduleV2") {
		expr, _ := ev.props["ScheduleExpression"].(string) // ScheduleV2
		if expr == "" {
			expr, _ = ev.props["Schedule"].(string) // Schedule
		}
		every, _ := parseRate(expr)
		out = append(out, Schedule{Function: ev.function, Expression: expr, Every: every})
	}
	return out
}

type event struct {
	function, name string
	props          map[string]any
}

func (t *Template) events(types ...string) []event {
	var out []event
	for _, fn := range t.LogicalIDs(typeFunction) {
		evs, _ := t.resources[fn].Properties["Events"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(evs)) {
			ev, _ := evs[name].(map[string]any)
			typ, _ := ev["Type"].(string)
			if !slices.Contains(types, typ) {
				continue
			}
			props, _ := ev["Properties"].(map[string]any)
			out = append(out, event{function: fn, name: name, props: props})
		}
	}
	return out
}

// parseRate parses "rate(N unit)" with unit minute(s), second(s), hour(s)
// or day(s).
func parseRate(expr string) (time.Duration, error) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(expr), "rate(")
	if !ok {
		return 0, fmt.Errorf("not a rate expression: %q", expr)
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return 0, fmt.Errorf("unterminated rate expression: %q", expr)
	}
	fields := strings.Fields(inner)
	if len(fields) != 2 {
		return 0, fmt.Errorf("rate expression %q: want \"rate(N unit)\"", expr)
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("rate expression %q: bad value", expr)
	}
	var unit time.Duration
	switch strings.TrimSuffix(fields[1], "s") {
	case "second":
		unit = time.Second
	case "minute":
		unit = time.Minute
	case "hour":
		unit = time.Hour
	case "day":
		unit = 24 * time.Hour
	default:
		return 0, fmt.Errorf("rate expression %q: unknown unit %q", expr, fields[1])
	}
	return time.Duration(n) * unit, nil
}

// refTarget returns the logical id named by {"Ref": id} or
// {"Fn::GetAtt": [id, attr]}, or the value itself if it is a string.
func refTarget(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if r, ok := x["Ref"].(string); ok {
			return r
		}
		switch ga := x["Fn::GetAtt"].(type) {
		case []any:
			if len(ga) > 0 {
				s, _ := ga[0].(string)
				return s
			}
		case string:
			id, _, _ := strings.Cut(ga, ".")
			return id
		}
	}
	return ""
}

// toInt converts a template number (int, float64 or numeric string) to int.
func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case uint64:
		return int(x), true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil
	}
	return 0, false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
