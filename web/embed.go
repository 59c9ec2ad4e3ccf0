package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS holds the page's files rooted at static/: index.html, app.js, lib.js
// and style.css at its top level. internal/api serves it at "/" and
// "/static/{file}" (index.html refers to its files as static/…).
var FS fs.FS = mustSub(static, "static")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic("web: " + err.Error()) // unreachable: dir is embedded above
	}
	return sub
}
