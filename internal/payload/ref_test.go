package payload

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var goodRef = Ref{Bucket: "taskledger-payloads", Key: "inputs/" + strings.Repeat("a", 64), SHA256: strings.Repeat("a", 64), Size: 9000}

func TestRefJSONRoundTrip(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(goodRef)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"bucket":"taskledger-payloads","key":"inputs/` + strings.Repeat("a", 64) + `","sha256":"` + strings.Repeat("a", 64) + `","size":9000}`; string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
	got, err := ParseRef(b)
	if err != nil || got != goodRef {
		t.Fatalf("ParseRef = %+v, %v", got, err)
	}
}

func TestParseRefStrict(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("a", 64)
	bad := map[string]string{
		"unknown field":  `{"bucket":"bkt","key":"k","sha256":"` + sha + `","size":1,"extra":1}`,
		"missing size":   `{"bucket":"bkt","key":"k","sha256":"` + sha + `"}`,
		"trailing data":  `{"bucket":"bkt","key":"k","sha256":"` + sha + `","size":1} {}`,
		"stray brace":    `{"bucket":"bkt","key":"k","sha256":"` + sha + `","size":1}}`,
		"upper hex":      `{"bucket":"bkt","key":"k","sha256":"` + strings.ToUpper(sha) + `","size":1}`,
		"short hex":      `{"bucket":"bkt","key":"k","sha256":"abc","size":1}`,
		"negative size":  `{"bucket":"bkt","key":"k","sha256":"` + sha + `","size":-1}`,
		"fraction size":  `{"bucket":"bkt","key":"k","sha256":"` + sha + `","size":1.5}`,
		"bad bucket":     `{"bucket":"Bkt_1","key":"k","sha256":"` + sha + `","size":1}`,
		"absolute key":   `{"bucket":"bkt","key":"/k","sha256":"` + sha + `","size":1}`,
		"dot-dot key":    `{"bucket":"bkt","key":"a/../b","sha256":"` + sha + `","size":1}`,
		"empty key":      `{"bucket":"bkt","key":"","sha256":"` + sha + `","size":1}`,
		"not an object":  `[]`,
		"string as size": `{"bucket":"bkt","key":"k","sha256":"` + sha + `","size":"1"}`,
	}
	for name, in := range bad {
		if _, err := ParseRef([]byte(in)); !errors.Is(err, ErrBadRef) {
			t.Errorf("%s: err = %v, want ErrBadRef", name, err)
		}
	}
}

func TestRefAttributeRoundTrip(t *testing.T) {
	t.Parallel()
	got, err := RefFromAttribute(goodRef.Attribute())
	if err != nil || got != goodRef {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	m := goodRef.Attribute().(*types.AttributeValueMemberM).Value
	mutate := map[string]func(map[string]types.AttributeValue){
		"size as string": func(m map[string]types.AttributeValue) { m["size"] = &types.AttributeValueMemberS{Value: "1"} },
		"extra":          func(m map[string]types.AttributeValue) { m["x"] = &types.AttributeValueMemberS{Value: "1"} },
		"missing key":    func(m map[string]types.AttributeValue) { delete(m, "key") },
		"bad sha":        func(m map[string]types.AttributeValue) { m["sha256"] = &types.AttributeValueMemberS{Value: "zz"} },
		"size not int":   func(m map[string]types.AttributeValue) { m["size"] = &types.AttributeValueMemberN{Value: "1e3"} },
	}
	for name, f := range mutate {
		c := map[string]types.AttributeValue{}
		for k, v := range m {
			c[k] = v
		}
		f(c)
		if _, err := RefFromAttribute(&types.AttributeValueMemberM{Value: c}); !errors.Is(err, ErrBadRef) {
			t.Errorf("%s: err = %v, want ErrBadRef", name, err)
		}
	}
	if _, err := RefFromAttribute(&types.AttributeValueMemberS{Value: "x"}); !errors.Is(err, ErrBadRef) {
		t.Errorf("non-map: err = %v", err)
	}
}

func TestInlineThresholdConfigurable(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, "Not_A_Bucket", Options{}); err == nil {
		t.Fatal("New accepted an invalid bucket name")
	}
	cases := []struct {
		limit, n int
		inline   bool
	}{
		{0, DefaultInlineLimit, true},
		{0, DefaultInlineLimit + 1, false},
		{100, 100, true},
		{100, 101, false},
		{-1, 0, false},
	}
	for _, c := range cases {
		st, err := New(nil, "payloads", Options{InlineLimit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Inline(c.n); got != c.inline {
			t.Errorf("limit %d: Inline(%d) = %v, want %v", c.limit, c.n, got, c.inline)
		}
	}
}
