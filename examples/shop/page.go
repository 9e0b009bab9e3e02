package main

import (
	"embed"
	"io/fs"
	"net/http"
)

// static is the page and its script, built into the binary.
//
//go:embed static
var static embed.FS

// pageHandler serves static/ at /: index.html, app.js, style.css.
func pageHandler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
