//go:build unix

package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// sockConn is a conn on a non-blocking socket. Every wait is a poll on the
// socket and on a pipe that a context.AfterFunc writes to when the context
// ends, so a cancellation wakes it at once; the poll's timeout is the
// context's deadline.
type sockConn struct {
	ctx  context.Context
	fd   int
	wake [2]int // the pipe: read end, write end
	stop func() bool
	// woke is closed once the AfterFunc that writes to the pipe has run,
	// so Close never closes the pipe under it.
	woke chan struct{}
}

// dial connects to 127.0.0.1:port. Its error wraps errRefused (and
// ECONNREFUSED) when nothing listens there, and ctx's error when ctx ends
// first.
func dial(ctx context.Context, port int) (conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fd, err := socket()
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	c := &sockConn{ctx: ctx, fd: fd, wake: [2]int{-1, -1}}
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	c.wake = p
	for _, f := range p {
		unix.CloseOnExec(f)
	}
	if err := unix.SetNonblock(p[1], true); err != nil {
		c.Close()
		return nil, fmt.Errorf("pipe: %w", err)
	}
	c.woke = make(chan struct{})
	c.stop = context.AfterFunc(ctx, func() {
		defer close(c.woke)
		_, _ = unix.Write(p[1], []byte{0})
	})

	err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	for errors.Is(err, unix.EINTR) {
		err = c.wait(unix.POLLOUT)
		if err == nil {
			err = soError(fd)
		}
	}
	if errors.Is(err, unix.EINPROGRESS) {
		if err = c.wait(unix.POLLOUT); err == nil {
			err = soError(fd)
		}
	}
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, unix.ECONNREFUSED):
		c.Close()
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	default:
		c.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
}

// socket makes a non-blocking TCP socket, closed on exec.
func socket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP)
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// soError is the outcome of a connect that was in progress.
func soError(fd int) error {
	n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if n != 0 {
		return unix.Errno(n)
	}
	return nil
}

// wait waits until the socket is ready for events, or ctx ends (its error,
// then).
func (c *sockConn) wait(events int16) error {
	for {
		if err := c.ctx.Err(); err != nil {
			return err
		}
		timeout := -1
		if d, ok := c.ctx.Deadline(); ok {
			left := time.Until(d)
			if left <= 0 {
				// The context's own timer is about to say so: wait for it,
				// so that ctx.Err() is set whenever a call ends with it.
				<-c.ctx.Done()
				return c.ctx.Err()
			}
			timeout = int(min(left.Milliseconds()+1, math.MaxInt32))
		}
		fds := []unix.PollFd{{Fd: int32(c.fd), Events: events}, {Fd: int32(c.wake[0]), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, timeout)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("poll: %w", err)
		case n == 0 || fds[1].Revents != 0:
			continue // the deadline or the cancellation: ctx says which, above
		case fds[0].Revents != 0:
			return nil
		}
	}
}

func (c *sockConn) Write(p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(c.fd, p)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			if err := c.wait(unix.POLLOUT); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("%w while sending the request: %w", errLost, err)
		}
		p = p[n:]
	}
	return nil
}

func (c *sockConn) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(c.fd, p)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			if err := c.wait(unix.POLLIN); err != nil {
				return 0, err
			}
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *sockConn) Close() {
	if c.stop != nil && !c.stop() {
		<-c.woke // it ran, or is running: let it finish with the pipe
	}
	for _, f := range []int{c.fd, c.wake[0], c.wake[1]} {
		if f >= 0 {
			_ = unix.Close(f)
		}
	}
}
