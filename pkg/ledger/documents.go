package ledger

// DocumentRef is a document a generate task references (DESIGN §12), about
// 200 bytes in the item: the upload it came from, its format and the
// content-addressed copy the payload store keeps in S3 (inputs/<sha256>).
type DocumentRef struct {
	UploadID    string     `dynamodbav:"upload_id" json:"upload_id"`       // the POST /uploads id the submit named
	Format      string     `dynamodbav:"format" json:"format"`             // pdf, txt, md, html, csv, docx, png or jpeg
	ContentType string     `dynamodbav:"content_type" json:"content_type"` // as declared
	Ref         PayloadRef `dynamodbav:"ref" json:"ref"`                   // the verified bytes (inputs/<sha256>)
}
