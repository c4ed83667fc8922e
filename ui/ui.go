// Package ui is fence's web dashboard: static files, embedded in the binary,
// that the server answers under /ui/. The page reads everything it shows
// from the v1 API (GET /v1/locks, /v1/watch, /v1/fences, /v1/cluster), so
// it needs nothing of the server but those routes.
package ui

import (
	"embed"
	"io/fs"
	"mime"
	"path"
)

//go:embed static
var files embed.FS

// Files returns the dashboard's files: index.html and what it loads.
func Files() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // cannot happen: static is embedded
	}
	return sub
}

// ContentType returns the media type of the file name, by its extension.
func ContentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
