package loopback

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

func TestMain(m *testing.M) { testtime.VerifyTestMain(m) }

// start starts a Server for h and closes it when the test ends.
func start(t *testing.T, h http.Handler, opts *Options) *Server {
	t.Helper()
	s := New(h, opts)
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func (s *Server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port()) }

// dial opens a raw connection to s, closed when the test ends.
func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(t.Context(), "tcp4", s.addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer reports whether the server has closed c, waiting up to
// d for it.
func closedByServer(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	_, err := c.Read(make([]byte, 1))
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return false
	}
	require.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "read: %v", err)
	return true
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })

func TestServer_HostOK(t *testing.T) {
	t.Parallel()
	s := New(ok, nil)
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = "127.0.0.1:0"
	require.False(t, s.HostOK(req), "before Start no Host is ours")

	s = start(t, ok, nil)
	p := strconv.Itoa(s.Port())
	for host, want := range map[string]bool{
		"127.0.0.1:" + p:       true,
		"localhost:" + p:       true,
		"127.0.0.1":            false,
		"localhost":            false,
		"127.0.0.1:1":          false,
		"LOCALHOST:" + p:       false,
		"[::1]:" + p:           false,
		"evil.example:" + p:    false,
		"127.0.0.1.:" + p:      false,
		"127.0.0.1:" + p + " ": false,
		"":                     false,
	} {
		req.Host = host
		require.Equal(t, want, s.HostOK(req), "%q", host)
	}
}

func TestServer_StartClose(t *testing.T) {
	t.Parallel()
	s := New(ok, nil)
	require.Zero(t, s.Port())
	require.NoError(t, s.Start())
	port := s.Port()
	require.Positive(t, port)
	require.ErrorIs(t, s.Start(), ErrStarted)

	taken := New(ok, &Options{Port: port})
	err := taken.Start()
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.ErrorContains(t, err, "listen on 127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, taken.Close())
	require.ErrorIs(t, taken.Start(), ErrClosed)

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { require.NoError(t, s.Close()) })
	}
	wg.Wait()
	require.ErrorIs(t, s.Start(), ErrClosed)
	require.Equal(t, port, s.Port(), "Port keeps the port after Close")
	require.NoError(t, New(ok, nil).Close(), "Close without Start")

	mine, closed := errors.New("mine: started"), errors.New("mine: closed")
	own := New(ok, &Options{Started: mine, Closed: closed})
	require.NoError(t, own.Start())
	require.ErrorIs(t, own.Start(), mine)
	require.NoError(t, own.Close())
	require.ErrorIs(t, own.Start(), closed, "the owner's sentinels")
}

// Without KeepAlives every connection ends with its answer; with them, it
// carries the next request.
func TestServer_KeepAlives(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		s := start(t, ok, &Options{KeepAlives: keep})
		c := dial(t, s)
		br := bufio.NewReader(c)
		for i := range 2 {
			_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+s.addr()+"\r\n\r\n")
			if i == 1 && !keep {
				require.True(t, closedByServer(t, c, testtime.Bound(5*time.Second)), "the connection outlived its answer")
				break
			}
			require.NoError(t, err)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
			require.Equal(t, !keep, resp.Close)
		}
	}
}

// Pending connections are bounded: silent ones beyond MaxPending are
// evicted, oldest first, and a connection that is sending its request is
// kept over silent ones.
func TestServer_EvictsOldestSilentFirst(t *testing.T) {
	t.Parallel()
	const grace = 20 * time.Millisecond
	s := start(t, ok, &Options{MaxPending: 2, Grace: grace})
	waitPending := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return s.Conns().Pending == n }, testtime.Bound(5*time.Second), time.Millisecond)
	}

	silent := dial(t, s)
	waitPending(1)
	talking := dial(t, s)
	_, err := io.WriteString(talking, "GET / HTTP/1.1\r\nHost: ") // and never the rest
	require.NoError(t, err)
	waitPending(2)
	time.Sleep(2 * grace)

	newer := dial(t, s)
	require.True(t, closedByServer(t, silent, testtime.Bound(5*time.Second)), "the oldest silent connection makes room")
	require.Equal(t, int64(1), s.Conns().Evicted)
	time.Sleep(2 * grace)

	dial(t, s)
	require.True(t, closedByServer(t, newer, testtime.Bound(5*time.Second)), "a silent connection goes before an older talking one")
	require.False(t, closedByServer(t, talking, 50*time.Millisecond), "the talking connection is kept")
	require.Equal(t, 2, s.Conns().Pending)
	require.Equal(t, int64(2), s.Conns().Evicted)
}

// However many connections come, at most MaxPending are held, and every
// connection beyond them is turned over; none is refused.
func TestServer_BoundsPending(t *testing.T) {
	t.Parallel()
	s := start(t, ok, &Options{MaxPending: 8, Grace: time.Millisecond})
	const n = 50
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, s)
		require.LessOrEqual(t, s.Conns().Pending, 8)
	}
	require.Eventually(t, func() bool { return s.Conns().Evicted == n-8 }, testtime.Bound(10*time.Second), time.Millisecond)
	require.Equal(t, 8, s.Conns().Pending)
	for _, c := range conns[:n-8] {
		require.True(t, closedByServer(t, c, testtime.Bound(5*time.Second)))
	}
	// The newest is served.
	_, err := io.WriteString(conns[n-1], "GET / HTTP/1.1\r\nHost: "+s.addr()+"\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conns[n-1]), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
}

// Admit admits up to MaxAdmitted connections; an admitted connection is
// no longer pending, is never evicted, and frees its place when it closes.
func TestAdmit(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Admit(r) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		require.True(t, Admit(r), "an admitted connection stays admitted")
		if r.URL.Path == "/hold" {
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s := start(t, h, &Options{MaxAdmitted: 1, MaxPending: 1, Grace: time.Millisecond, KeepAlives: true})
	get := func(c net.Conn, br *bufio.Reader, path string) int {
		t.Helper()
		_, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+s.addr()+"\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		return resp.StatusCode
	}

	held := dial(t, s)
	heldDone := make(chan int, 1)
	go func() { heldDone <- get(held, bufio.NewReader(held), "/hold") }()
	require.Eventually(t, func() bool { return s.Conns().Admitted == 1 }, testtime.Bound(5*time.Second), time.Millisecond)
	require.Zero(t, s.Conns().Pending)

	// The pending place is taken and turned over, and the admitted
	// connection is untouched by it.
	for range 3 {
		dial(t, s)
	}
	require.Eventually(t, func() bool { return s.Conns().Evicted == 2 }, testtime.Bound(5*time.Second), time.Millisecond)

	other := dial(t, s)
	require.Equal(t, http.StatusServiceUnavailable, get(other, bufio.NewReader(other), "/"), "beyond MaxAdmitted")

	close(release)
	require.Equal(t, http.StatusNoContent, <-heldDone)
	require.NoError(t, held.Close())
	require.Eventually(t, func() bool { return s.Conns().Admitted == 0 }, testtime.Bound(5*time.Second), time.Millisecond)
	late := dial(t, s)
	require.Equal(t, http.StatusNoContent, get(late, bufio.NewReader(late), "/"), "the place is free again")

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusNoContent, rec.Code, "a request from no Server is admitted")
}

// Close ends an Accept waiting for room, and every connection.
func TestServer_CloseWhileFull(t *testing.T) {
	t.Parallel()
	s := New(ok, &Options{MaxPending: 1, Grace: time.Hour})
	require.NoError(t, s.Start())
	a := dial(t, s)
	require.Eventually(t, func() bool { return s.Conns().Pending == 1 }, testtime.Bound(5*time.Second), time.Millisecond)
	dial(t, s) // waits for room that a grace of an hour never makes
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(testtime.Bound(10 * time.Second)):
		t.Fatal("Close did not return")
	}
	require.True(t, closedByServer(t, a, testtime.Bound(5*time.Second)))
}
