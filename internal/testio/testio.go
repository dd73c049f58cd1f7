// Package testio holds the I/O helpers tests share: a Buffer that a logger,
// a child process's stderr and the test may write and read at once. It is
// for tests only; nothing in a shipped binary imports it.
package testio

import (
	"bytes"
	"sync"
)

// A Buffer is a bytes.Buffer that is safe for concurrent use: goroutines
// write to it (an slog handler, an exec.Cmd's Stderr) while the test reads
// what has arrived so far. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
