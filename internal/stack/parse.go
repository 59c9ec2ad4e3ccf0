package stack

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// shortForms lists CloudFormation's short-form tags ("!Name") and the
// long-form key each becomes.
var shortForms = map[string]string{
	"Ref":          "Ref",
	"Condition":    "Condition",
	"GetAtt":       "Fn::GetAtt",
	"Sub":          "Fn::Sub",
	"If":           "Fn::If",
	"Join":         "Fn::Join",
	"Equals":       "Fn::Equals",
	"Not":          "Fn::Not",
	"And":          "Fn::And",
	"Or":           "Fn::Or",
	"Select":       "Fn::Select",
	"Split":        "Fn::Split",
	"FindInMap":    "Fn::FindInMap",
	"Base64":       "Fn::Base64",
	"Cidr":         "Fn::Cidr",
	"GetAZs":       "Fn::GetAZs",
	"ImportValue":  "Fn::ImportValue",
	"Transform":    "Fn::Transform",
	"Length":       "Fn::Length",
	"ToJsonString": "Fn::ToJsonString",
	"ForEach":      "Fn::ForEach",
	// Rule functions (the template's Rules section).
	"Contains":         "Fn::Contains",
	"EachMemberEquals": "Fn::EachMemberEquals",
	"EachMemberIn":     "Fn::EachMemberIn",
	"RefAll":           "Fn::RefAll",
	"ValueOf":          "Fn::ValueOf",
	"ValueOfAll":       "Fn::ValueOfAll",
}

// parseYAML decodes a CloudFormation/SAM YAML document into plain Go values
// (map[string]any, []any, string, int, float64, bool, nil), rewriting
// short-form intrinsic tags into their long form.
//
// A document parsed before is not parsed again: its values are copied
// from the first parse. A test process loads template.yaml for every
// fresh stack, and decoding it was a sixth of the worker tests' own CPU.
func parseYAML(data []byte) (any, error) {
	key := sha256.Sum256(data)
	if v, ok := parsed.Load(key); ok {
		return deepCopy(v), nil
	}
	v, err := decodeYAML(data)
	if err != nil {
		return nil, err
	}
	parsed.Store(key, v)
	return deepCopy(v), nil
}

// parsed holds each document parseYAML decoded, by its SHA-256; nobody
// holds its values, only copies.
var parsed sync.Map

func decodeYAML(data []byte) (any, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	if root.Kind == 0 { // empty document
		return nil, nil
	}
	return convertNode(&root)
}

func convertNode(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return convertNode(n.Content[0])
	case yaml.AliasNode:
		return convertNode(n.Alias)
	}

	tag := n.ShortTag()
	if strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		return convertTagged(n, tag[1:])
	}
	return convertPlain(n)
}

// convertPlain converts an untagged (or standard-tagged) node.
func convertPlain(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp", "!!binary":
			// CloudFormation has no dates: "2012-10-17" stays a string.
			return n.Value, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := convertNode(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping key is not a scalar", k.Line)
			}
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				return nil, fmt.Errorf("line %d: YAML merge keys are not supported in CloudFormation templates", k.Line)
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			v, err := convertNode(vn)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node kind %d", n.Line, n.Kind)
}

// convertTagged rewrites "!Name value" into {"<long name>": value}.
func convertTagged(n *yaml.Node, name string) (any, error) {
	key, ok := shortForms[name]
	if !ok {
		return nil, fmt.Errorf("line %d: unknown CloudFormation tag !%s", n.Line, name)
	}

	var v any
	if n.Kind == yaml.ScalarNode {
		// A tagged scalar is always a string ("!Ref 10" names "10").
		v = n.Value
	} else {
		var err error
		if v, err = convertPlain(n); err != nil {
			return nil, err
		}
	}

	if name == "GetAtt" {
		if s, ok := v.(string); ok {
			// !GetAtt A.B.C → ["A", "B.C"]: the logical id never has a dot,
			// attribute names can (e.g. Endpoint.Address).
			id, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q: want LogicalId.Attribute", n.Line, s)
			}
			v = []any{id, attr}
		}
	}
	return map[string]any{key: v}, nil
}
