package stack

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// noValue is what {"Ref": "AWS::NoValue"} evaluates to; maps and lists drop it.
type noValueT struct{}

var noValue = noValueT{}

// evaluator resolves intrinsic functions in resource properties at Create
// time: parameters take their defaults, resources the names and attributes
// of what Create has made so far.
type evaluator struct {
	t      *Template
	pseudo map[string]string
	refs   map[string]string            // logical id → value of !Ref
	attrs  map[string]map[string]string // logical id → attribute → value
	conds  map[string]bool
}

func newEvaluator(t *Template, region, stackName string) *evaluator {
	return &evaluator{
		t: t,
		pseudo: map[string]string{
			"AWS::Region":    region,
			"AWS::AccountId": "000000000000",
			"AWS::Partition": "aws",
			"AWS::URLSuffix": "amazonaws.com",
			"AWS::StackName": stackName,
			"AWS::StackId":   "arn:aws:cloudformation:" + region + ":000000000000:stack/" + stackName + "/local",
		},
		refs:  map[string]string{},
		attrs: map[string]map[string]string{},
		conds: map[string]bool{},
	}
}

// eval returns v with every intrinsic function resolved. where names the
// value in errors ("TaskQueue.RedrivePolicy").
func (e *evaluator) eval(v any, where string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if isIntrinsic(x) {
			return e.call(x, where)
		}
		out := make(map[string]any, len(x))
		for k, item := range x {
			r, err := e.eval(item, where+"."+k)
			if err != nil {
				return nil, err
			}
			if r != noValue {
				out[k] = r
			}
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(x))
		for i, item := range x {
			r, err := e.eval(item, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return nil, err
			}
			if r != noValue {
				out = append(out, r)
			}
		}
		return out, nil
	}
	return v, nil
}

func (e *evaluator) call(m map[string]any, where string) (any, error) {
	for fn, arg := range m { // exactly one key
		switch fn {
		case "Ref":
			name, ok := arg.(string)
			if !ok {
				return nil, fmt.Errorf("%s: Ref of a non-string", where)
			}
			return e.ref(name, where)
		case "Fn::GetAtt":
			id, attr, err := getAttArgs(arg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			return e.getAtt(id, attr, where)
		case "Fn::Sub":
			return e.sub(arg, where)
		case "Fn::Join":
			args, err := e.evalList(arg, 2, fn, where)
			if err != nil {
				return nil, err
			}
			sep, ok := args[0].(string)
			items, ok2 := args[1].([]any)
			if !ok || !ok2 {
				return nil, fmt.Errorf("%s: Fn::Join wants [string, list]", where)
			}
			parts := make([]string, len(items))
			for i, it := range items {
				parts[i] = scalarString(it)
			}
			return strings.Join(parts, sep), nil
		case "Fn::Split":
			args, err := e.evalList(arg, 2, fn, where)
			if err != nil {
				return nil, err
			}
			sep, ok := args[0].(string)
			s, ok2 := args[1].(string)
			if !ok || !ok2 {
				return nil, fmt.Errorf("%s: Fn::Split wants [string, string]", where)
			}
			var out []any
			for _, p := range strings.Split(s, sep) {
				out = append(out, p)
			}
			return out, nil
		case "Fn::Select":
			args, err := e.evalList(arg, 2, fn, where)
			if err != nil {
				return nil, err
			}
			i, ok := toInt(args[0])
			items, ok2 := args[1].([]any)
			if !ok || !ok2 || i < 0 || i >= len(items) {
				return nil, fmt.Errorf("%s: Fn::Select index out of range", where)
			}
			return items[i], nil
		case "Fn::If":
			l, ok := arg.([]any)
			if !ok || len(l) != 3 {
				return nil, fmt.Errorf("%s: Fn::If wants [condition, then, else]", where)
			}
			name, _ := l[0].(string)
			c, err := e.condition(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if c {
				return e.eval(l[1], where)
			}
			return e.eval(l[2], where)
		case "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or", "Condition":
			return e.boolean(m, where)
		}
		return nil, fmt.Errorf("%s: intrinsic %s is not supported by internal/stack", where, fn)
	}
	panic("unreachable")
}

func (e *evaluator) evalList(arg any, n int, fn, where string) ([]any, error) {
	l, ok := arg.([]any)
	if !ok || len(l) != n {
		return nil, fmt.Errorf("%s: %s wants a list of %d", where, fn, n)
	}
	r, err := e.eval(l, where)
	if err != nil {
		return nil, err
	}
	out := r.([]any)
	if len(out) != n {
		return nil, fmt.Errorf("%s: %s argument evaluated to AWS::NoValue", where, fn)
	}
	return out, nil
}

func (e *evaluator) ref(name, where string) (any, error) {
	if name == "AWS::NoValue" {
		return noValue, nil
	}
	if v, ok := e.pseudo[name]; ok {
		return v, nil
	}
	if v, ok := e.refs[name]; ok {
		return v, nil
	}
	params, _ := e.t.doc["Parameters"].(map[string]any)
	if p, ok := params[name].(map[string]any); ok {
		def, ok := p["Default"]
		if !ok {
			return nil, fmt.Errorf("%s: parameter %s has no Default", where, name)
		}
		s := scalarString(def)
		typ, _ := p["Type"].(string)
		if typ == "CommaDelimitedList" || strings.HasPrefix(typ, "List<") {
			var out []any
			for _, part := range strings.Split(s, ",") {
				out = append(out, strings.TrimSpace(part))
			}
			return out, nil
		}
		return s, nil
	}
	if _, ok := e.t.resources[name]; ok {
		return nil, fmt.Errorf("%s: Ref %s: resource not created (only tables and queues are)", where, name)
	}
	return nil, fmt.Errorf("%s: Ref to unknown name %s", where, name)
}

func (e *evaluator) getAtt(id, attr, where string) (any, error) {
	if v, ok := e.attrs[id][attr]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("%s: Fn::GetAtt %s.%s is not available locally", where, id, attr)
}

func getAttArgs(arg any) (id, attr string, err error) {
	switch x := arg.(type) {
	case string:
		id, attr, ok := strings.Cut(x, ".")
		if ok {
			return id, attr, nil
		}
	case []any:
		if len(x) == 2 {
			id, ok1 := x[0].(string)
			attr, ok2 := x[1].(string)
			if ok1 && ok2 {
				return id, attr, nil
			}
		}
	}
	return "", "", fmt.Errorf("malformed Fn::GetAtt %v", arg)
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

func (e *evaluator) sub(arg any, where string) (any, error) {
	var (
		tmpl string
		vars = map[string]any{}
	)
	switch x := arg.(type) {
	case string:
		tmpl = x
	case []any:
		if len(x) != 2 {
			return nil, fmt.Errorf("%s: Fn::Sub wants string or [string, map]", where)
		}
		tmpl, _ = x[0].(string)
		m, ok := x[1].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: Fn::Sub variables are not a map", where)
		}
		for k, v := range m {
			r, err := e.eval(v, where+".Fn::Sub."+k)
			if err != nil {
				return nil, err
			}
			vars[k] = r
		}
	default:
		return nil, fmt.Errorf("%s: Fn::Sub wants string or [string, map]", where)
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(tmpl, func(s string) string {
		name := s[2 : len(s)-1]
		if strings.HasPrefix(name, "!") { // ${!Literal}
			return "${" + name[1:] + "}"
		}
		var (
			v   any
			err error
		)
		if vv, ok := vars[name]; ok {
			v = vv
		} else if id, attr, ok := strings.Cut(name, "."); ok {
			v, err = e.getAtt(id, attr, where)
		} else {
			v, err = e.ref(name, where)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return scalarString(v)
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// condition evaluates a named entry of the template's Conditions.
func (e *evaluator) condition(name string) (bool, error) {
	if v, ok := e.conds[name]; ok {
		return v, nil
	}
	conds, _ := e.t.doc["Conditions"].(map[string]any)
	def, ok := conds[name]
	if !ok {
		return false, fmt.Errorf("unknown condition %q", name)
	}
	v, err := e.boolean(def, "Conditions."+name)
	if err != nil {
		return false, err
	}
	e.conds[name] = v
	return v, nil
}

func (e *evaluator) boolean(v any, where string) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok || !isIntrinsic(m) {
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return false, fmt.Errorf("%s: not a condition: %v", where, v)
	}
	for fn, arg := range m {
		switch fn {
		case "Condition":
			name, _ := arg.(string)
			return e.condition(name)
		case "Fn::Equals":
			args, err := e.evalList(arg, 2, fn, where)
			if err != nil {
				return false, err
			}
			return equalValues(args[0], args[1]), nil
		case "Fn::Not", "Fn::And", "Fn::Or":
			l, ok := arg.([]any)
			if !ok || len(l) == 0 || (fn == "Fn::Not" && len(l) != 1) {
				return false, fmt.Errorf("%s: malformed %s", where, fn)
			}
			bs := make([]bool, len(l))
			for i, c := range l {
				b, err := e.boolean(c, where)
				if err != nil {
					return false, err
				}
				bs[i] = b
			}
			switch fn {
			case "Fn::Not":
				return !bs[0], nil
			case "Fn::And":
				return !slices.Contains(bs, false), nil
			default:
				return slices.Contains(bs, true), nil
			}
		}
		return false, fmt.Errorf("%s: %s is not a condition function", where, fn)
	}
	panic("unreachable")
}

func equalValues(a, b any) bool {
	la, okA := a.([]any)
	lb, okB := b.([]any)
	if okA || okB {
		if !okA || !okB || len(la) != len(lb) {
			return false
		}
		for i := range la {
			if !equalValues(la[i], lb[i]) {
				return false
			}
		}
		return true
	}
	return scalarString(a) == scalarString(b)
}

// scalarString renders a template scalar the way CloudFormation does.
func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// references returns the logical ids a value refers to (Ref, Fn::GetAtt and
// ${...} in Fn::Sub), for dependency ordering.
func references(v any, add func(string)) {
	switch x := v.(type) {
	case map[string]any:
		if isIntrinsic(x) {
			for fn, arg := range x {
				switch fn {
				case "Ref":
					if s, ok := arg.(string); ok {
						add(s)
					}
					return
				case "Fn::GetAtt":
					if id, _, err := getAttArgs(arg); err == nil {
						add(id)
					}
					return
				case "Fn::Sub":
					tmpl, _ := arg.(string)
					if l, ok := arg.([]any); ok && len(l) > 0 {
						tmpl, _ = l[0].(string)
						references(l[1:], add)
					}
					for _, m := range subVar.FindAllStringSubmatch(tmpl, -1) {
						if !strings.HasPrefix(m[1], "!") {
							id, _, _ := strings.Cut(m[1], ".")
							add(id)
						}
					}
					return
				}
			}
		}
		for _, item := range x {
			references(item, add)
		}
	case []any:
		for _, item := range x {
			references(item, add)
		}
	}
}
