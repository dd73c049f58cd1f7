//go:build !unix

package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// netConn is a conn on the net package, where there are no Unix sockets to
// make by hand. Its operations end when ctx does, through deadlines and an
// AfterFunc that closes the connection.
type netConn struct {
	ctx  context.Context
	c    net.Conn
	stop func() bool
}

func dial(ctx context.Context, port int) (conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", "127.0.0.1:"+strconv.Itoa(port))
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, syscall.ECONNREFUSED):
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	default:
		return nil, fmt.Errorf("connect: %w", err)
	}
	nc := &netConn{ctx: ctx, c: c}
	nc.stop = context.AfterFunc(ctx, func() { _ = c.Close() })
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	return nc, nil
}

func (n *netConn) Write(p []byte) error {
	if _, err := n.c.Write(p); err != nil {
		if n.ctx.Err() != nil {
			return n.ctx.Err()
		}
		return fmt.Errorf("%w while sending the request: %w", errLost, err)
	}
	return nil
}

func (n *netConn) Read(p []byte) (int, error) {
	k, err := n.c.Read(p)
	if err != nil && n.ctx.Err() != nil {
		return k, n.ctx.Err()
	}
	return k, err
}

func (n *netConn) Close() {
	n.stop()
	_ = n.c.Close()
}
