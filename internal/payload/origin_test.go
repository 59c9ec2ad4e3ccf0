package payload

import (
	"context"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The page's CSP names the upload origin exactly: it must be the origin of
// the URLs PresignUpload hands out, deployed (virtual-hosted S3) and local
// (the stack's same-origin proxy), and reading it needs no credentials.
func TestUploadOriginIsThePresignedURLsOrigin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	withKeys := s3.New(s3.Options{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	noKeys := s3.New(s3.Options{Region: "eu-west-1"})
	for _, tc := range []struct {
		name, endpoint, want string
	}{
		{"deployed", "", "https://tl-payloads-123.s3.eu-west-1.amazonaws.com"},
		{"local proxy", "http://127.0.0.1:8080/_s3", "http://127.0.0.1:8080"},
	} {
		st, err := New(noKeys, "tl-payloads-123", Options{PresignEndpoint: tc.endpoint})
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.UploadOrigin(ctx)
		if err != nil || got != tc.want {
			t.Errorf("%s: UploadOrigin = %q, %v; want %q", tc.name, got, err, tc.want)
		}
		// A signed upload URL (what PresignUpload returns) has that origin.
		signer, _ := New(withKeys, "tl-payloads-123", Options{PresignEndpoint: tc.endpoint})
		signed, err := signer.presigner().PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("tl-payloads-123"), Key: aws.String(UploadKey("s", "u1"))})
		if err != nil {
			t.Fatal(err)
		}
		if u, _ := url.Parse(signed.URL); u.Scheme+"://"+u.Host != tc.want {
			t.Errorf("%s: a presigned upload goes to %s, not %s", tc.name, signed.URL, tc.want)
		}
	}
}
