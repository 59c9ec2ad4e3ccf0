package stack

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseShortForms(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		in   string
		want any
	}{
		{"ref", `v: !Ref TasksTable`, map[string]any{"Ref": "TasksTable"}},
		{"ref pseudo", `v: !Ref AWS::Region`, map[string]any{"Ref": "AWS::Region"}},
		{"getatt dotted", `v: !GetAtt TaskQueue.Arn`, map[string]any{"Fn::GetAtt": []any{"TaskQueue", "Arn"}}},
		{"getatt nested attribute", `v: !GetAtt Db.Endpoint.Address`, map[string]any{"Fn::GetAtt": []any{"Db", "Endpoint.Address"}}},
		{"getatt list", `v: !GetAtt [TaskQueue, Arn]`, map[string]any{"Fn::GetAtt": []any{"TaskQueue", "Arn"}}},
		{"sub string", `v: !Sub "${TasksTable.Arn}/index/by_state"`, map[string]any{"Fn::Sub": "${TasksTable.Arn}/index/by_state"}},
		{"sub list", "v: !Sub\n  - \"${A}-${B}\"\n  - B: !Ref X\n",
			map[string]any{"Fn::Sub": []any{"${A}-${B}", map[string]any{"B": map[string]any{"Ref": "X"}}}}},
		{"join", `v: !Join [",", !Ref AllowedOrigins]`,
			map[string]any{"Fn::Join": []any{",", map[string]any{"Ref": "AllowedOrigins"}}}},
		{"if with novalue", `v: !If [HasJwt, 1, !Ref AWS::NoValue]`,
			map[string]any{"Fn::If": []any{"HasJwt", 1, map[string]any{"Ref": "AWS::NoValue"}}}},
		{"nested condition", `v: !Not [!Equals [!Ref JwtIssuer, ""]]`,
			map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "JwtIssuer"}, ""}}}}},
		{"condition", `v: !Condition HasJwt`, map[string]any{"Condition": "HasJwt"}},
		{"tagged scalar is a string", `v: !Ref 10`, map[string]any{"Ref": "10"}},
		{"select split", `v: !Select [0, !Split [",", "a,b"]]`,
			map[string]any{"Fn::Select": []any{0, map[string]any{"Fn::Split": []any{",", "a,b"}}}}},
		{"tagged mapping", "v: !If\n  - C\n  - {a: 1}\n  - {}\n",
			map[string]any{"Fn::If": []any{"C", map[string]any{"a": 1}, map[string]any{}}}},
		// Untagged scalars keep YAML's types, except that dates stay strings.
		{"int", `v: 360`, 360},
		{"quoted int", `v: "30"`, "30"},
		{"bool", `v: true`, true},
		{"date stays string", `v: 2012-10-17`, "2012-10-17"},
		{"null", `v: ~`, nil},
		{"alias", "a: &x {k: !Ref Y}\nv: *x\n", map[string]any{"k": map[string]any{"Ref": "Y"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseYAML([]byte(tt.in))
			if err != nil {
				t.Fatalf("parseYAML(%q): %v", tt.in, err)
			}
			if v := got.(map[string]any)["v"]; !reflect.DeepEqual(v, tt.want) {
				t.Errorf("parseYAML(%q)[v] = %#v, want %#v", tt.in, v, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()

	tests := []struct{ name, in, wantErr string }{
		{"unknown tag", "a: 1\nv: !Frobnicate x\n", "line 2: unknown CloudFormation tag !Frobnicate"},
		{"getatt without dot", "v: !GetAtt Queue\n", "want LogicalId.Attribute"},
		{"duplicate key", "v: 1\nv: 2\n", "duplicate key"},
		{"bad yaml", "v: [\n", "did not find expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseYAML([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseYAML(%q) error = %v, want containing %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestEvaluator(t *testing.T) {
	t.Parallel()

	tmpl, err := parse([]byte(`
Parameters:
  Origins: {Type: CommaDelimitedList, Default: "https://a.example, https://b.example"}
  Issuer: {Type: String, Default: ""}
  Provider: {Type: String, Default: bedrock}
Conditions:
  HasIssuer: !Not [!Equals [!Ref Issuer, ""]]
  UseBedrock: !Equals [!Ref Provider, bedrock]
  Both: !And [!Condition HasIssuer, !Condition UseBedrock]
  Either: !Or [!Condition HasIssuer, !Condition UseBedrock]
Resources:
  Q: {Type: AWS::SQS::Queue}
`))
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvaluator(tmpl, "eu-west-1", "st")
	ev.refs["Q"] = "http://q"
	ev.attrs["Q"] = map[string]string{"Arn": "arn:aws:sqs:eu-west-1:000000000000:st-Q"}

	tests := []struct {
		in   string
		want any
	}{
		{`!Join [",", !Ref Origins]`, "https://a.example,https://b.example"},
		{`!Select [1, !Ref Origins]`, "https://b.example"},
		{`!Sub "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/*"`, "arn:aws:bedrock:eu-west-1::foundation-model/*"},
		{`!Sub "${Q.Arn}|${Q}|${!Literal}"`, "arn:aws:sqs:eu-west-1:000000000000:st-Q|http://q|${Literal}"},
		{`!Sub ["${X}-x", {X: !Ref Provider}]`, "bedrock-x"},
		{`!If [HasIssuer, yes, no]`, "no"},
		{`!If [UseBedrock, yes, no]`, "yes"},
		{`!If [Both, yes, no]`, "no"},
		{`!If [Either, yes, no]`, "yes"},
		{`{deadLetterTargetArn: !GetAtt Q.Arn, maxReceiveCount: 10}`,
			map[string]any{"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:000000000000:st-Q", "maxReceiveCount": 10}},
		{`[a, !If [HasIssuer, b, !Ref AWS::NoValue], c]`, []any{"a", "c"}},
		{`{a: !Ref AWS::NoValue, b: 1}`, map[string]any{"b": 1}},
	}
	for _, tt := range tests {
		v, err := parseYAML([]byte("v: " + tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		got, err := ev.eval(v.(map[string]any)["v"], "test")
		if err != nil {
			t.Errorf("eval(%s): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("eval(%s) = %#v, want %#v", tt.in, got, tt.want)
		}
	}

	for _, bad := range []string{`!GetAtt Q.Nope`, `!Ref Missing`, `!ImportValue x`, `!If [NoSuchCondition, a, b]`} {
		v, _ := parseYAML([]byte("v: " + bad))
		if _, err := ev.eval(v.(map[string]any)["v"], "test"); err == nil {
			t.Errorf("eval(%s): want error", bad)
		}
	}
}
