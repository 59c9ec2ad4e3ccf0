package emulator

import (
	"net/http"
	"testing"
)

func TestLegEndpoint(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	if _, err := LegEndpoint("nope"); err == nil || LegSkipped(err) {
		t.Fatalf("unknown leg: err = %v, want a non-skip error", err)
	}
	if _, err := LegEndpoint("external"); !LegSkipped(err) {
		t.Fatalf("external without AWS_ENDPOINT_URL: err = %v, want a skip", err)
	}
	ep, err := LegEndpoint("kumo")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := LegEndpoint("kumo")
	if again != ep {
		t.Fatalf("kumo endpoint changed between calls: %s then %s", ep, again)
	}
	resp, err := http.Get(ep)
	if err != nil {
		t.Fatalf("kumo leg does not answer: %v", err)
	}
	resp.Body.Close()
	StopLegs()
	if _, err := http.Get(ep); err == nil {
		t.Fatalf("kumo still answers on %s after StopLegs", ep)
	}
}
