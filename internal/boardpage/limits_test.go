package boardpage

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/internal/testtime"
)

// openStream opens an event stream on a connection of its own and returns
// the answer; the stream ends when the test does.
func (p *page) openStream(cookie *http.Cookie) *http.Response {
	p.t.Helper()
	ctx, cancel := context.WithCancel(p.t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+"/events", nil)
	require.NoError(p.t, err)
	req.AddCookie(cookie)
	tr := &http.Transport{DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(p.t, err)
	p.t.Cleanup(func() { cancel(); resp.Body.Close(); tr.CloseIdleConnections() })
	return resp
}

// At most MaxEventStreams event streams are open at once: one more is
// refused with 503 in plain words and its connection closed; once a stream
// ends, a new one opens. Before the cap, 1,000 streams held 1,018
// descriptors.
func TestServer_CapsEventStreams(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	streams := make([]*http.Response, MaxEventStreams)
	for i := range streams {
		streams[i] = p.openStream(cookie)
		require.Equal(t, http.StatusOK, streams[i].StatusCode, "stream %d", i)
	}
	for range 3 {
		resp := p.openStream(cookie)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.True(t, resp.Close, "the refusal closes its connection")
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Contains(t, string(body), "Too many open pages")
		require.Contains(t, string(body), strconv.Itoa(MaxEventStreams))
	}

	require.NoError(t, streams[0].Body.Close())
	require.Eventually(t, func() bool {
		return p.openStream(cookie).StatusCode == http.StatusOK
	}, testtime.Bound(10*time.Second), 20*time.Millisecond, "a stream opens once another has ended")
}

// At most MaxSignedInConns connections that carried a signed-in request
// are held; a signed-in request on one more is answered 503 in plain words,
// and the connection closed.
func TestServer_CapsSignedInConnections(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	get := func(c net.Conn) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", p.base+"/fragment", nil)
		require.NoError(t, err)
		req.AddCookie(cookie)
		require.NoError(t, req.Write(c))
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		require.NoError(t, err)
		return resp
	}
	var d net.Dialer
	dial := func() net.Conn {
		c, err := d.DialContext(t.Context(), "tcp4", p.base[len("http://"):])
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The test's own client holds signed-in connections too (login, csrf):
	// drop them so the count is the test's.
	p.client.Transport.(*http.Transport).CloseIdleConnections()
	require.Eventually(t, func() bool { return p.srv.http.Conns().Admitted == 0 }, testtime.Bound(10*time.Second), 5*time.Millisecond)

	for i := range MaxSignedInConns {
		resp := get(dial())
		require.Equal(t, http.StatusOK, resp.StatusCode, "connection %d", i)
		resp.Body.Close()
	}
	resp := get(dial())
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.True(t, resp.Close)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "Too many connections")
	require.Equal(t, MaxSignedInConns, p.srv.http.Conns().Admitted)
}

// However many connections that never sign in arrive, the page holds at
// most MaxOtherConns of them, and a signed-in browser is still served.
func TestServer_BoundsOtherConnections(t *testing.T) {
	p := newPage(t, nil)
	cookie := p.login()
	var d net.Dialer
	const idle = 300
	for range idle {
		c, err := d.DialContext(t.Context(), "tcp4", p.base[len("http://"):])
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.LessOrEqual(t, p.srv.http.Conns().Pending, MaxOtherConns)
	}
	// On a new connection, behind the idle ones in the accept queue.
	p.client.Transport.(*http.Transport).CloseIdleConnections()
	resp, _ := p.do("GET", "/fragment", cookie, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	st := p.srv.http.Conns()
	require.LessOrEqual(t, st.Pending, MaxOtherConns)
	require.Positive(t, st.Evicted)
}

// A refused request's connection is closed, not kept for another.
func TestServer_RefusalsClose(t *testing.T) {
	p := newPage(t, nil)
	port := strconv.Itoa(p.srv.Port())
	for _, tc := range []struct {
		target  string
		headers map[string]string
		code    int
	}{
		{"/", nil, http.StatusUnauthorized},
		{"/login?token=nope", nil, http.StatusForbidden},
		{"/", map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden},
	} {
		resp, _ := p.do("GET", tc.target, nil, nil, tc.headers)
		require.Equal(t, tc.code, resp.StatusCode, tc.target)
		require.True(t, resp.Close, "%s %v", tc.target, tc.headers)
	}
}
