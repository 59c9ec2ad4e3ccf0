package bench

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// StepFunctionsASL is the Amazon States Language definition of the Step
// Functions Standard comparison: generate → wait for approval (task token)
// → deliver.
//
//go:embed stepfunctions.asl.json
var StepFunctionsASL []byte

// ASLPath is the happy path of a state machine: the states one execution
// enters, in order, with what each implies.
type ASLPath struct {
	States []string
	// Transitions is the number of billed state transitions: one per state
	// entered (Step Functions counts a transition each time a step runs).
	Transitions int
	// LambdaInvokes are the Task states invoking Lambda; SQSTokenSends the
	// states sending a task token through SQS (.waitForTaskToken).
	LambdaInvokes, SQSTokenSends int
}

type aslState struct {
	Type     string `json:"Type"`
	Resource string `json:"Resource"`
	Next     string `json:"Next"`
	End      bool   `json:"End"`
	Default  string `json:"Default"`
	Choices  []struct {
		Next string `json:"Next"`
	} `json:"Choices"`
}

// WalkASL follows def from StartAt to the end of its happy path (Next;
// a Choice's Default, else its first choice), counting the states entered.
// A missing state, a loop, or a path that never ends is an error.
func WalkASL(def []byte) (ASLPath, error) {
	var m struct {
		StartAt string              `json:"StartAt"`
		States  map[string]aslState `json:"States"`
	}
	if err := json.Unmarshal(def, &m); err != nil {
		return ASLPath{}, fmt.Errorf("bench: state machine definition: %w", err)
	}
	var p ASLPath
	seen := map[string]bool{}
	for name := m.StartAt; ; {
		st, ok := m.States[name]
		if !ok {
			return ASLPath{}, fmt.Errorf("bench: state machine: state %q is not defined", name)
		}
		if seen[name] {
			return ASLPath{}, fmt.Errorf("bench: state machine: the happy path loops at %q", name)
		}
		seen[name] = true
		p.States = append(p.States, name)
		p.Transitions++
		if st.Type == "Task" {
			switch {
			case strings.HasPrefix(st.Resource, "arn:aws:states:::lambda:invoke"), strings.Contains(st.Resource, ":lambda:") && strings.Contains(st.Resource, ":function:"):
				p.LambdaInvokes++
			case strings.HasPrefix(st.Resource, "arn:aws:states:::sqs:sendMessage.waitForTaskToken"):
				p.SQSTokenSends++
			}
		}
		next := st.Next
		switch st.Type {
		case "Succeed", "Fail":
			return p, nil
		case "Choice":
			next = st.Default
			if next == "" && len(st.Choices) > 0 {
				next = st.Choices[0].Next
			}
		}
		if st.End {
			return p, nil
		}
		if next == "" {
			return ASLPath{}, fmt.Errorf("bench: state machine: state %q neither ends nor names a next state", name)
		}
		name = next
	}
}
