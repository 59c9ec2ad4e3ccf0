package bedrock

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// documentFormats are the Converse document formats a task's documents
// may have; imageFormats the image ones.
var (
	documentFormats = map[string]types.DocumentFormat{
		"pdf": types.DocumentFormatPdf, "csv": types.DocumentFormatCsv, "doc": types.DocumentFormatDoc,
		"docx": types.DocumentFormatDocx, "html": types.DocumentFormatHtml, "txt": types.DocumentFormatTxt,
		"md": types.DocumentFormatMd,
	}
	imageFormats = map[string]types.ImageFormat{"png": types.ImageFormatPng, "jpeg": types.ImageFormatJpeg}
)

// documentBlocks turns a request's documents into Converse content blocks:
// a document block (bytes source, the neutral name) for pdf, csv, doc,
// docx, html, txt and md, an image block for png and jpeg. Another format
// is a permanent error (the request is never sent without it).
func documentBlocks(docs []contract.Document) ([]types.ContentBlock, error) {
	out := make([]types.ContentBlock, 0, len(docs))
	for i, d := range docs {
		name := d.Name
		if name == "" {
			name = fmt.Sprintf("document-%d", i+1)
		}
		if f, ok := imageFormats[d.Format]; ok {
			out = append(out, &types.ContentBlockMemberImage{Value: types.ImageBlock{
				Format: f, Source: &types.ImageSourceMemberBytes{Value: d.Bytes},
			}})
			continue
		}
		f, ok := documentFormats[d.Format]
		if !ok {
			return nil, retrypolicy.Permanent(fmt.Errorf("bedrock: document %d has format %q, which Converse does not accept", i+1, d.Format))
		}
		out = append(out, &types.ContentBlockMemberDocument{Value: types.DocumentBlock{
			Name: aws.String(name), Format: f, Source: &types.DocumentSourceMemberBytes{Value: d.Bytes},
		}})
	}
	return out, nil
}

// AcceptsDocuments is true: a request's documents go to Converse as
// document and image blocks.
const AcceptsDocuments = true
