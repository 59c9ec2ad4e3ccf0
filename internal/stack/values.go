package stack

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// NoValue is what Ref AWS::NoValue evaluates to; Eval drops it from lists
// and maps.
var NoValue = absentValue{}

type absentValue struct{}

// Values evaluates the template for one deployment: its parameters (the
// defaults, less overrides), its Conditions, and the intrinsics that depend
// only on them (Ref, Fn::If, Fn::Equals, Fn::Not, Fn::And, Fn::Or,
// Condition, Fn::Contains, Fn::Join, Fn::Select, Fn::Split). References to
// resources stay symbolic unless the caller resolves them (see Eval).
type Values struct {
	params map[string]any
	conds  map[string]any
	memo   map[string]bool
}

// Values returns the evaluation for these parameter overrides (name →
// value as given on the command line; a CommaDelimitedList splits on ",").
func (t *Template) Values(overrides map[string]string) (*Values, error) {
	v := &Values{params: map[string]any{}, conds: t.Section("Conditions"), memo: map[string]bool{}}
	params := t.Section("Parameters")
	for name := range overrides {
		if _, ok := params[name]; !ok {
			return nil, fmt.Errorf("stack: no parameter %s", name)
		}
	}
	for name, raw := range params {
		p, _ := raw.(map[string]any)
		s := ""
		if d, ok := p["Default"]; ok && d != nil {
			s = fmt.Sprint(d)
		}
		if o, ok := overrides[name]; ok {
			s = o
		}
		if p["Type"] == "CommaDelimitedList" {
			var l []any
			for _, x := range strings.Split(s, ",") {
				l = append(l, x)
			}
			v.params[name] = l
			continue
		}
		v.params[name] = s
	}
	return v, nil
}

// Param returns a parameter's value (a string, or []any for a list).
func (v *Values) Param(name string) any { return v.params[name] }

// Condition evaluates a named condition.
func (v *Values) Condition(name string) (bool, error) {
	if b, ok := v.memo[name]; ok {
		return b, nil
	}
	c, ok := v.conds[name]
	if !ok {
		return false, fmt.Errorf("stack: no condition %s", name)
	}
	x, err := v.Eval(c, nil)
	if err != nil {
		return false, fmt.Errorf("stack: condition %s: %w", name, err)
	}
	b, ok := x.(bool)
	if !ok {
		return false, fmt.Errorf("stack: condition %s is %v, not a boolean", name, x)
	}
	v.memo[name] = b
	return b, nil
}

// Eval evaluates x. refs resolves what is not a parameter: "X" for Ref X and
// "X.Attr" for Fn::GetAtt [X, Attr]; what refs lacks stays symbolic
// ("ref:X", "getatt:X.Attr"), and Fn::Sub stays "sub:<template>".
func (v *Values) Eval(x any, refs map[string]string) (any, error) {
	switch x := x.(type) {
	case []any:
		out := []any{}
		for _, e := range x {
			r, err := v.Eval(e, refs)
			if err != nil {
				return nil, err
			}
			if r != NoValue {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if r, ok, err := v.intrinsic(k, arg, refs); ok || err != nil {
					return r, err
				}
			}
		}
		out := map[string]any{}
		for k, e := range x {
			r, err := v.Eval(e, refs)
			if err != nil {
				return nil, err
			}
			if r != NoValue {
				out[k] = r
			}
		}
		return out, nil
	}
	return x, nil
}

func (v *Values) intrinsic(k string, arg any, refs map[string]string) (any, bool, error) {
	args, _ := arg.([]any)
	evalArgs := func(n int) ([]any, error) {
		if len(args) != n {
			return nil, fmt.Errorf("%s wants %d arguments, has %v", k, n, arg)
		}
		out := make([]any, n)
		for i, a := range args {
			r, err := v.Eval(a, refs)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	switch k {
	case "Ref":
		name, _ := arg.(string)
		if name == "AWS::NoValue" {
			return NoValue, true, nil
		}
		if p, ok := v.params[name]; ok {
			return p, true, nil
		}
		if r, ok := refs[name]; ok {
			return r, true, nil
		}
		return "ref:" + name, true, nil
	case "Fn::GetAtt":
		key := fmt.Sprintf("%v.%v", args[0], args[1])
		if r, ok := refs[key]; ok {
			return r, true, nil
		}
		return "getatt:" + key, true, nil
	case "Fn::Sub":
		return fmt.Sprint("sub:", arg), true, nil
	case "Condition":
		b, err := v.Condition(fmt.Sprint(arg))
		return b, true, err
	case "Fn::If":
		if len(args) != 3 {
			return nil, true, fmt.Errorf("Fn::If %v", arg)
		}
		b, err := v.Condition(fmt.Sprint(args[0]))
		if err != nil {
			return nil, true, err
		}
		r, err := v.Eval(args[map[bool]int{true: 1, false: 2}[b]], refs)
		return r, true, err
	case "Fn::Equals":
		a, err := evalArgs(2)
		if err != nil {
			return nil, true, err
		}
		return reflect.DeepEqual(a[0], a[1]), true, nil
	case "Fn::Not":
		a, err := evalArgs(1)
		if err != nil {
			return nil, true, err
		}
		b, ok := a[0].(bool)
		if !ok {
			return nil, true, fmt.Errorf("Fn::Not of %v", a[0])
		}
		return !b, true, nil
	case "Fn::And", "Fn::Or":
		a, err := evalArgs(len(args))
		if err != nil {
			return nil, true, err
		}
		acc := k == "Fn::And"
		for _, x := range a {
			b, ok := x.(bool)
			if !ok {
				return nil, true, fmt.Errorf("%s of %v", k, x)
			}
			if k == "Fn::And" {
				acc = acc && b
			} else {
				acc = acc || b
			}
		}
		return acc, true, nil
	case "Fn::Contains":
		a, err := evalArgs(2)
		if err != nil {
			return nil, true, err
		}
		l, _ := a[0].([]any)
		return slices.Contains(l, a[1]), true, nil
	case "Fn::Join":
		a, err := evalArgs(2)
		if err != nil {
			return nil, true, err
		}
		l, _ := a[1].([]any)
		parts := make([]string, len(l))
		for i, p := range l {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, fmt.Sprint(a[0])), true, nil
	case "Fn::Split":
		a, err := evalArgs(2)
		if err != nil {
			return nil, true, err
		}
		var out []any
		for _, p := range strings.Split(fmt.Sprint(a[1]), fmt.Sprint(a[0])) {
			out = append(out, p)
		}
		return out, true, nil
	case "Fn::Select":
		a, err := evalArgs(2)
		if err != nil {
			return nil, true, err
		}
		i, err := strconv.Atoi(fmt.Sprint(a[0]))
		l, _ := a[1].([]any)
		if err != nil || i < 0 || i >= len(l) {
			return nil, true, fmt.Errorf("Fn::Select %v of %v", a[0], a[1])
		}
		return l[i], true, nil
	}
	return nil, false, nil
}

// RuleFailures evaluates the template's Rules for this deployment and
// returns the AssertDescription of every assertion that fails, as
// CloudFormation would refuse the deploy with.
func (t *Template) RuleFailures(v *Values) ([]string, error) {
	rules := t.Section("Rules")
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		r, _ := rules[n].(map[string]any)
		if c, ok := r["RuleCondition"]; ok {
			b, err := v.Eval(c, nil)
			if err != nil {
				return nil, fmt.Errorf("stack: rule %s: %w", n, err)
			}
			if b != true {
				continue
			}
		}
		as, _ := r["Assertions"].([]any)
		for _, a := range as {
			am, _ := a.(map[string]any)
			b, err := v.Eval(am["Assert"], nil)
			if err != nil {
				return nil, fmt.Errorf("stack: rule %s: %w", n, err)
			}
			if b != true {
				out = append(out, fmt.Sprint(am["AssertDescription"]))
			}
		}
	}
	return out, nil
}
