package templatetest

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// objectPrefix recognises an S3 object resource of the template's own
// bucket under one literal key prefix: !Sub ${Bucket.Arn}/<prefix>/*.
func objectPrefix(tpl *stack.Template, r any) (bucket, prefix string, ok bool) {
	m, _ := r.(map[string]any)
	sub, _ := m["Fn::Sub"].(string)
	g := subObjects.FindStringSubmatch(sub)
	if g == nil || tpl.ResourceType(g[1]) != "AWS::S3::Bucket" {
		return "", "", false
	}
	return g[1], g[2], true
}

// listBucketNeeds is why a function needs s3:ListBucket on the payload
// bucket although its code never lists: with it S3 answers a missing key
// 404 (NoSuchKey/NotFound), without it 403 AccessDenied, and the function
// answers differently for a missing object than for a fault.
var listBucketNeeds = map[string]string{
	"SubmitFunction": "S3's 404 for a missing upload intent, upload or inherited document (unknown-upload, upload-not-received, document-expired instead of a 500)",
}

var subObjects = regexp.MustCompile(`^\$\{(\w+)\.Arn\}/([a-z][a-z0-9-]*/)\*$`)

// wantS3 is each function's S3 access, by action and key prefix of the
// payload bucket (DESIGN §12): submit puts large inputs (content-addressed)
// and reads inputs (regenerate) and results (the task view), declares
// document uploads (upload-intents/), presigns their PUT (uploads/) and
// reads and copies them to inputs/ at submit; the worker
// reads inputs and puts results under its own assignment (a repeated put
// reads the object back); the reconciler puts a large read-back result
// under the assignment it completes. Nobody deletes: lifecycle rules
// expire objects. Only submit may list (s3:ListBucket on the bucket, see
// listBucketNeeds): S3 answers a missing key 404 only with it, 403
// otherwise, and submit's answers depend on telling a missing upload,
// intent or document from a fault. The worker and the reconciler end the
// same way for a 404 and a 403 (the task fails or is parked with the S3
// error), so they do without.
var wantS3 = map[string][]string{
	"SubmitFunction": {"s3:GetObject on inputs/", "s3:GetObject on results/", "s3:GetObject on upload-intents/", "s3:GetObject on uploads/",
		"s3:ListBucket on the bucket",
		"s3:PutObject on inputs/", "s3:PutObject on upload-intents/", "s3:PutObject on uploads/"},
	"WorkerFunction":     {"s3:GetObject on inputs/", "s3:GetObject on results/", "s3:PutObject on results/"},
	"ReconcilerFunction": {"s3:GetObject on results/", "s3:PutObject on results/"},
	// The receiving team's example function: no access to the stack's
	// payloads.
	"ExampleDestinationFunction": nil,
	"StreamFunction":             {},
}

// TestPayloadBucket checks the claim-check bucket: encrypted, every public
// access block on, ACLs disabled, a TLS-only bucket policy, lifecycle rules
// that keep an object at least as long as the task item that may reference
// it and expire everything (orphans included) after that, and per-function
// access on exact key prefixes — with the bucket named in each such
// function's environment.
func TestPayloadBucket(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	if got := tpl.LogicalIDs("AWS::S3::Bucket"); !slices.Equal(got, []string{"PayloadBucket"}) {
		t.Fatalf("buckets = %v, want [PayloadBucket]", got)
	}
	b, _ := tpl.Resource("PayloadBucket")

	enc := listOf(dig(b, "BucketEncryption", "ServerSideEncryptionConfiguration"))
	if len(enc) != 1 {
		t.Errorf("BucketEncryption: want one rule, got %v", enc)
	} else if alg := dig(enc[0], "ServerSideEncryptionByDefault", "SSEAlgorithm"); alg != "AES256" && alg != "aws:kms" {
		t.Errorf("SSEAlgorithm = %v, want AES256 or aws:kms", alg)
	}
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if v := dig(b, "PublicAccessBlockConfiguration", k); v != true {
			t.Errorf("PublicAccessBlockConfiguration.%s = %v, want true", k, v)
		}
	}
	if rules := listOf(dig(b, "OwnershipControls", "Rules")); len(rules) != 1 || dig(rules[0], "ObjectOwnership") != "BucketOwnerEnforced" {
		t.Errorf("OwnershipControls = %v, want BucketOwnerEnforced (no ACLs)", rules)
	}

	// Lifecycle: results/ and everything else expire after the retention
	// window (the item that references a result expires 7 days after its
	// completion, which follows the put within the call), and no sooner;
	// incomplete multipart uploads are aborted.
	minDays := int(ledger.DefaultRetention/(24*time.Hour)) + 1
	expires := map[string]int{}
	abort := false
	for _, r := range listOf(dig(b, "LifecycleConfiguration", "Rules")) {
		if dig(r, "Status") != "Enabled" {
			t.Errorf("lifecycle rule %v is not Enabled", dig(r, "Id"))
			continue
		}
		prefix, _ := dig(r, "Prefix").(string)
		if d, ok := dig(r, "ExpirationInDays").(int); ok {
			expires[prefix] = d
		}
		if d, ok := dig(r, "AbortIncompleteMultipartUpload", "DaysAfterInitiation").(int); ok && d >= 1 {
			abort = true
		}
	}
	for _, prefix := range []string{"results/", "inputs/", ""} {
		d, ok := expires[prefix]
		if !ok && prefix != "inputs/" {
			t.Errorf("no expiration rule for prefix %q (orphans would stay forever)", prefix)
		}
		if ok && d < minDays {
			t.Errorf("prefix %q expires after %d days: sooner than a task item that may reference it (retention %s + 1 day)", prefix, d, ledger.DefaultRetention)
		}
	}
	if !abort {
		t.Error("no AbortIncompleteMultipartUpload rule")
	}

	// The bucket policy denies every request that is not over TLS.
	tlsOnly := false
	for _, id := range tpl.LogicalIDs("AWS::S3::BucketPolicy") {
		p, _ := tpl.Resource(id)
		if ref(p["Bucket"]) != "PayloadBucket" {
			continue
		}
		for _, st := range listOf(dig(p, "PolicyDocument", "Statement")) {
			m, _ := st.(map[string]any)
			covers := map[string]bool{}
			for _, r := range listOf(m["Resource"]) {
				if getAtt(r, "Arn") == "PayloadBucket" {
					covers["bucket"] = true
				}
				if sm, _ := r.(map[string]any); sm["Fn::Sub"] == "${PayloadBucket.Arn}/*" {
					covers["objects"] = true
				}
			}
			if m["Effect"] == "Deny" && m["Principal"] == "*" && m["Action"] == "s3:*" &&
				dig(m, "Condition", "Bool", "aws:SecureTransport") == "false" && covers["bucket"] && covers["objects"] {
				tlsOnly = true
			}
		}
	}
	if !tlsOnly {
		t.Error("no bucket policy denying s3:* on the bucket and its objects when aws:SecureTransport is false")
	}

	// Per-function access: exact actions on exact prefixes.
	for id, f := range tpl.Functions() {
		var got []string
		for _, s := range statements(t, tpl, id) {
			for _, a := range s.actions {
				if !strings.HasPrefix(a, "s3:") {
					continue
				}
				for _, r := range s.resources {
					if b := getAtt(r, "Arn"); a == "s3:ListBucket" && tpl.ResourceType(b) == "AWS::S3::Bucket" {
						if s.condition != nil {
							t.Errorf("%s: s3:ListBucket with a condition %v: S3's 404-or-403 decision for GetObject/HeadObject would not count it", id, s.condition)
						}
						if ref(f.Env["PAYLOAD_BUCKET"]) != b {
							t.Errorf("%s: %s on %s but PAYLOAD_BUCKET does not name it", id, a, b)
						}
						got = append(got, a+" on the bucket")
						continue
					}
					bucket, prefix, ok := objectPrefix(tpl, r)
					if !ok {
						t.Errorf("%s: %s on %v: want only ${PayloadBucket.Arn}/<prefix>/*", id, a, r)
						continue
					}
					if ref(f.Env["PAYLOAD_BUCKET"]) != bucket {
						t.Errorf("%s: %s on %s but PAYLOAD_BUCKET does not name it", id, a, bucket)
					}
					got = append(got, a+" on "+prefix)
				}
			}
		}
		slices.Sort(got)
		want, known := wantS3[id]
		if !known {
			t.Errorf("%s: no entry in wantS3", id)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: S3 access %v, want %v", id, got, want)
		}
	}
	if fns := slices.Sorted(maps.Keys(tpl.Functions())); len(fns) != len(wantS3) {
		t.Errorf("functions %v, wantS3 covers %d", fns, len(wantS3))
	}
}

// dig walks nested maps by key.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
