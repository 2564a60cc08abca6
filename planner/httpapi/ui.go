package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard (/ui/): static assets embedded in the binary, no CDN;
// app.js draws nodes > GPUs coloured by job, the queues and the recent
// decisions from the API, and redraws on each change of the index.
//
//go:embed ui
var uiFiles embed.FS

func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/ui/", http.FileServerFS(sub))
}
