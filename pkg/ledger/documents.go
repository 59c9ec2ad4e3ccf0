package ledger

// DocumentRef is a document a generate task references (DESIGN §12): the
// upload it came from, its format and the content-addressed copy the
// payload store keeps under inputs/<sha256>. The item holds only this
// reference (about 200 bytes); the bytes stay in S3.
type DocumentRef struct {
	// UploadID is the POST /uploads id the submit named.
	UploadID string `dynamodbav:"upload_id" json:"upload_id"`
	// Format is the short format name (pdf, txt, md, html, csv, docx, png,
	// jpeg); ContentType the declared Content-Type.
	Format      string `dynamodbav:"format" json:"format"`
	ContentType string `dynamodbav:"content_type" json:"content_type"`
	// Ref is where the verified bytes are (inputs/<sha256>).
	Ref PayloadRef `dynamodbav:"ref" json:"ref"`
}
