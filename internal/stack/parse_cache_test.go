package stack

import "testing"

// TestParseYAMLGivesEveryCallerItsOwnValues: a document parsed again
// comes from the first parse, and what one caller changes in its values
// never reaches another's.
func TestParseYAMLGivesEveryCallerItsOwnValues(t *testing.T) {
	doc := []byte("Resources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      Tags: [a, b]\n")
	first, err := parseYAML(doc)
	if err != nil {
		t.Fatal(err)
	}
	q := first.(map[string]any)["Resources"].(map[string]any)["Q"].(map[string]any)
	q["Type"] = "changed"
	q["Properties"].(map[string]any)["Tags"].([]any)[0] = "changed"
	second, err := parseYAML(doc)
	if err != nil {
		t.Fatal(err)
	}
	q2 := second.(map[string]any)["Resources"].(map[string]any)["Q"].(map[string]any)
	if q2["Type"] != "AWS::SQS::Queue" || q2["Properties"].(map[string]any)["Tags"].([]any)[0] != "a" {
		t.Fatalf("second parse sees the first caller's changes: %v", q2)
	}
}
