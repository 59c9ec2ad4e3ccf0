package payload

import (
	"context"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// presigner is the presign client of PresignUpload (and UploadOrigin), with
// Options.PresignEndpoint applied, then extra.
func (s *Store) presigner(extra ...func(*s3.Options)) *s3.PresignClient {
	return s3.NewPresignClient(s.s3, func(o *s3.PresignOptions) {
		if s.presignEndpoint != "" {
			o.ClientOptions = append(o.ClientOptions, func(co *s3.Options) {
				co.BaseEndpoint, co.UsePathStyle = aws.String(s.presignEndpoint), true
			})
		}
		o.ClientOptions = append(o.ClientOptions, extra...)
	})
}

// UploadOrigin is the origin (scheme://host[:port]) of the URLs
// PresignUpload returns: the page's Content-Security-Policy allows its PUT
// there and nowhere else. The SDK resolves it exactly as for a real upload
// (region, addressing style, Options.PresignEndpoint), signed with a
// placeholder key: no credentials are looked up, and nothing is sent.
func (s *Store) UploadOrigin(ctx context.Context) (string, error) {
	signed, err := s.presigner(func(o *s3.Options) { o.Credentials = credentials.NewStaticCredentialsProvider("ORIGIN", "ORIGIN", "") }).
		PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(UploadKey("origin", "origin"))})
	if err != nil {
		return "", fmt.Errorf("payload: upload origin: %w", err)
	}
	u, err := url.Parse(signed.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("payload: upload origin: presigned URL %q is not an http(s) URL", signed.URL)
	}
	return u.Scheme + "://" + u.Host, nil
}
