package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/clearctl"
	"github.com/tractat-us/bee/hooks"
)

// FuzzRun_Input feeds bee-hook arbitrary stdin with a fake bridge that is
// alive, and whose answer echoes the input and, on failure, the token.
// Whatever the input: no panic, exit 0, nothing on stdout (neither the
// writer run is given nor os.Stdout), at most one line on stderr, and never
// the token.
func FuzzRun_Input(f *testing.F) {
	for _, seed := range []string{
		`{"session_id":"s","transcript_path":"/t/s.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"clear"}`,
		`{"source":"startup","model":"m"}`,
		`{"source":"clear","session_id":"fail"}`,
		`{"source":"clear","session_id":"202"}`,
		`{"source":"clear","session_id":"a\nb\u2028c\u001b[2J"}`,
		`{"hook_event_name":"Stop","source":"clear"}`,
		`{"source":"clear"}{"source":"clear"}`,
		`{"source":`,
		`null`,
		``,
		"\xff\xfe{\x00}",
	} {
		f.Add([]byte(seed))
	}
	fx := newFixture(f)
	base := fx.base()
	base.Retire = func(_ context.Context, _ int, token string, req clearctl.RetireRequest) (clearctl.RetireResponse, error) {
		switch req.SessionID {
		case "fail":
			return clearctl.RetireResponse{}, errors.New("refused token " + token + "\n" + req.TranscriptPath)
		case "202":
			return clearctl.RetireResponse{}, &clearctl.StatusError{Code: 202}
		}
		return clearctl.RetireResponse{Retired: req.SessionID, Current: req.TranscriptPath + token}, nil
	}

	// Catch a write to os.Stdout too, which run is never given but could
	// reach for.
	r, w, err := os.Pipe()
	require.NoError(f, err)
	orig := os.Stdout
	os.Stdout = w
	f.Cleanup(func() {
		os.Stdout = orig
		w.Close()
		r.Close()
	})

	f.Fuzz(func(t *testing.T, data []byte) {
		var stderr bytes.Buffer
		code := runWith(t.Context(), base, hooks.WaitConfig{}, fx.args("--timeout", "5s"), bytes.NewReader(data), failWriter{t}, &stderr)
		require.Equal(t, 0, code)
		out := stderr.String()
		require.LessOrEqual(t, strings.Count(out, "\n"), 1, "stderr %q", out)
		if out != "" {
			require.True(t, strings.HasPrefix(out, "bee-hook: ") && strings.HasSuffix(out, "\n"), "stderr %q", out)
		}
		require.NotContains(t, out, fx.entry.Token)

		require.Zero(t, pending(t, r), "something wrote to os.Stdout")
	})
}

// pending reads what is waiting in the pipe r without blocking and returns
// how many bytes that was (at most 64).
func pending(t *testing.T, r *os.File) int {
	t.Helper()
	rc, err := r.SyscallConn()
	require.NoError(t, err)
	var n int
	var rerr error
	require.NoError(t, rc.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), make([]byte, 64))
		return true // one try: never wait for data
	}))
	if errors.Is(rerr, syscall.EAGAIN) {
		return 0
	}
	require.NoError(t, rerr)
	return n
}
