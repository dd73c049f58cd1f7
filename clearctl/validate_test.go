package clearctl

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetireRequest_Validate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  RetireRequest
		want string // "" for valid
	}{
		{"empty", RetireRequest{}, ""},
		{"uuid", RetireRequest{SessionID: "0f8d2b3c-5a61-4e7e-9a0b-8c1d2e3f4a5b", TranscriptPath: "/home/a b/.claude/projects/-x/0f8d.jsonl"}, ""},
		{"unicode path", RetireRequest{TranscriptPath: "/home/jörg/日本/s.jsonl"}, ""},
		{"longest id", RetireRequest{SessionID: strings.Repeat("a", MaxSessionIDBytes)}, ""},
		{"id too long", RetireRequest{SessionID: strings.Repeat("a", MaxSessionIDBytes+1)}, "session_id is 129 bytes, more than 128"},
		{"id with escape", RetireRequest{SessionID: "s\x1b[2J"}, `session_id holds '\x1b' at byte 1`},
		{"id with space", RetireRequest{SessionID: "a b"}, "session_id holds ' '"},
		{"id with slash", RetireRequest{SessionID: "../x"}, "session_id holds '/'"},
		{"id with unicode", RetireRequest{SessionID: "é"}, "session_id holds"},
		{"id with bidi", RetireRequest{SessionID: "a\u202eb"}, "session_id holds"},
		{"path with newline", RetireRequest{TranscriptPath: "/t/a\nb"}, "transcript_path holds the control character U+000A"},
		{"path with c1", RetireRequest{TranscriptPath: "/t/\u009b"}, "transcript_path holds the control character U+009B"},
		{"path not utf-8", RetireRequest{TranscriptPath: "/t/\xff"}, "transcript_path is not valid UTF-8"},
		{"path too long", RetireRequest{TranscriptPath: "/" + strings.Repeat("p", MaxTranscriptPathBytes)}, "transcript_path is 4097 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// A bad session_id is refused with 400 naming the field, and retires
// nothing.
func TestServer_RefusesBadSessionID(t *testing.T) {
	t.Parallel()
	r := &recordingRetirer{}
	s := newTestServer(t, r, nil)
	rec := serve(s, newRequest(t, s, "POST", "/retire", `{"session_id":"s\u001b]52;c;eA==\u0007"}`))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	var body errorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Contains(t, body.Error, "session_id")
	_, n := r.lastRequest()
	require.Zero(t, n, "nothing retired")

	rec = serve(s, newRequest(t, s, "POST", "/retire", `{"session_id":"`+strings.Repeat("x", 1000)+`"}`))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), "session_id is 1000 bytes")
}

// The Server serves at most MaxConns authenticated requests at once: one
// more is answered 503 at once, saying so, while a request without the
// token is still answered (401) at once, since slots are kept for
// authenticated requests only. Once a slot is free, requests are served.
func TestServer_CapsConnections(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	s := newTestServer(t, RetirerFunc(func(ctx context.Context, _ RetireRequest) (RetireResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return RetireResponse{}, ctx.Err()
		}
		return RetireResponse{Retired: mintedID(1), Current: mintedID(2)}, nil
	}), &Options{AnswerWithin: time.Minute})

	// Fill every slot with a retire that waits (they queue behind the first).
	var wg sync.WaitGroup
	for range MaxConns {
		wg.Go(func() {
			_, err := Retire(context.Background(), s.Port(), testToken, RetireRequest{})
			assert.NoError(t, err)
		})
	}
	require.Eventually(t, func() bool { return s.retiresRunning() == MaxConns }, 10*time.Second, 5*time.Millisecond,
		"the %d retires did not all reach the server", MaxConns)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := Retire(ctx, s.Port(), testToken, RetireRequest{})
	se, ok := errors.AsType[*StatusError](err)
	require.True(t, ok, "one authenticated request beyond the cap: %v", err)
	require.Equal(t, http.StatusServiceUnavailable, se.Code)
	require.Contains(t, se.Body, "bridge busy")
	require.Equal(t, MaxConns, s.retiresRunning(), "the refused request retired nothing")

	_, err = Retire(ctx, s.Port(), "wrong-token", RetireRequest{})
	se, ok = errors.AsType[*StatusError](err)
	require.True(t, ok, "a request without the token is answered while the slots are full: %v", err)
	require.Equal(t, http.StatusUnauthorized, se.Code)

	free()
	wg.Wait()
	_, err = Retire(ctx, s.Port(), testToken, RetireRequest{})
	require.NoError(t, err, "once the slots are free the request is served")
}

// retiresRunning reports how many retires have started and not ended.
func (s *Server) retiresRunning() int { return int(s.running.Load()) }

// FuzzServer_SessionID posts a fuzzed session_id (and transcript_path)
// through the whole handler: the retire happens exactly when both are
// valid, a refusal is a 400 that names the field, and what reaches the
// Retirer never holds anything but the allowed characters.
func FuzzServer_SessionID(f *testing.F) {
	for _, seed := range []struct{ id, path string }{
		{"0f8d2b3c-5a61-4e7e-9a0b-8c1d2e3f4a5b", "/t/s.jsonl"}, {"", ""}, {"s\x1b[2J", ""},
		{"a\u202eb", ""}, {strings.Repeat("z", MaxSessionIDBytes+1), ""}, {"ok", "/t/\n"}, {"ok", "\xff"},
		{"a:b.c_d-e", "/home/jörg/s.jsonl"},
	} {
		f.Add(seed.id, seed.path)
	}
	r := &recordingRetirer{}
	s := newTestServer(f, r, nil)
	f.Fuzz(func(t *testing.T, id, path string) {
		body, err := json.Marshal(RetireRequest{SessionID: id, TranscriptPath: path})
		require.NoError(t, err)
		_, before := r.lastRequest()
		rec := serve(s, newRequest(t, s, "POST", "/retire", string(body)))
		got, after := r.lastRequest()
		// encoding/json turns invalid UTF-8 into U+FFFD on the way: what the
		// server sees is what decoding the body gives.
		var sent RetireRequest
		require.NoError(t, json.Unmarshal(body, &sent))
		if sent.Validate() != nil {
			require.Equal(t, http.StatusBadRequest, rec.Code, "body %s", body)
			require.Regexp(t, `session_id|transcript_path`, rec.Body.String())
			require.Equal(t, before, after, "a refused request retired")
			return
		}
		require.Equal(t, http.StatusOK, rec.Code, "body %s: %s", body, rec.Body.String())
		require.Equal(t, before+1, after)
		require.Equal(t, sent, got)
		require.NoError(t, CheckSessionID(got.SessionID))
		require.Regexp(t, `^[A-Za-z0-9._:-]*$`, got.SessionID)
	})
}
