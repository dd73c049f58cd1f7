package clearctl

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// pipePort is the port a pipeListener says it listens on.
const pipePort = 4711

// A pipeListener is a net.Listener over net.Pipe, for a Server inside a
// synctest bubble: a loopback socket is real I/O, on which a bubble's
// goroutines never block durably (its fake clock would never move), while
// a pipe is channels and its deadlines are timers on the bubble's clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: pipePort}
}

// dial connects to the listener, whatever address is asked for.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// newBubbleServer starts a Server with testToken on a pipeListener, for a
// test inside a synctest bubble, and closes it when the test ends. The
// client posts to it through the pipe.
func newBubbleServer(t *testing.T, r Retirer, opts *Options) (*Server, *pipeClient) {
	t.Helper()
	s := New(testToken, r, opts)
	ln := newPipeListener()
	s.listen = func() (net.Listener, error) { return ln, nil }
	require.NoError(t, s.Start())
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, &pipeClient{c: &http.Client{Transport: &http.Transport{DialContext: ln.dial, DisableKeepAlives: true}}}
}

// A pipeClient posts to a bubble's Server as the hook would, with the
// token, over the pipe.
type pipeClient struct{ c *http.Client }

// post sends body to path and returns the status and the decoded answer.
func (p *pipeClient) post(ctx context.Context, path string, body, answer any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(pipePort)+path, bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := p.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, json.Unmarshal(raw, answer)
}
