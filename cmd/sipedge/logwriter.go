package main

import (
	"io"
	"os"
	"sync"
)

// reopenWriter is an io.Writer whose destination can be swapped while
// loggers write to it (SIGHUP after logrotate).
type reopenWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reopenWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.Write(p)
}

func (r *reopenWriter) swap(w io.Writer) {
	r.mu.Lock()
	old := r.w
	r.w = w
	r.mu.Unlock()
	if f, ok := old.(*os.File); ok && f != os.Stderr && f != os.Stdout {
		f.Close()
	}
}
