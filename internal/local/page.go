package local

import (
	"io/fs"
	"net/http"
)

// placeholder is served at "/" when Options.WebFS is nil.
const placeholder = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>taskledger (local)</title></head>
<body>
<h1>taskledger local stack</h1>
<p>No page is bundled with this build. The API is up:</p>
<pre>curl -i -X POST "$URL/tasks" -H 'Content-Type: application/json' -H "Idempotency-Key: $(uuidgen)" \
  -d '{"kind":"generate","input":{"prompt":"Say hello"}}'
curl -s "$URL/tasks/&lt;task_id&gt;"
curl -s "$URL/reviews"</pre>
</body></html>
`

// pageHandler serves the browser page: the files of webFS, or a
// placeholder when it is nil.
func pageHandler(webFS fs.FS) http.Handler {
	if webFS != nil {
		files := http.FileServerFS(webFS)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			files.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(placeholder))
	})
}
