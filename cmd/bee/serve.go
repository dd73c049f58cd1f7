package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/tractat-us/bee/internal/boardpage"
)

// ServeCommand is `bee serve`: the board page, until interrupted.
type ServeCommand struct {
	env *env

	port int
	from string
}

func (c *ServeCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("serve")
	fs.IntVar(&c.port, "port", 0, "the port on 127.0.0.1 to serve on (default a free one)")
	fs.StringVar(&c.from, "from", "", "post, cancel and re-address as this person (default $USER)")
	return fs
}

// Run serves the board page until ctx ends, then returns errInterrupted
// (bee exits 130). It prints
// the sign-in link on stdout, alone on its line, and everything else on
// stderr.
func (c *ServeCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	if fs.NArg() > 0 {
		return usagef("bee serve --help", "bee serve: unexpected argument %q", fs.Arg(0))
	}
	if c.port < 0 || c.port > 65535 {
		return usagef("bee serve --port 8700", "bee serve: --port %d is not a port (1..65535, or 0 for a free one)", c.port)
	}
	person, err := c.env.person("serve", c.from)
	if err != nil {
		return err
	}
	b, err := c.env.open("serve", true)
	if err != nil {
		return err
	}
	defer b.Close()

	stderr := c.env.main.Stderr
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	srv := boardpage.New(b, person, &boardpage.Options{Port: c.port, Logger: logger})
	if err := srv.Start(); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return refusedf(err, "leave --port out for a free port, or give another", "bee serve: port %d on 127.0.0.1 is taken by another program", c.port)
		}
		return fmt.Errorf("bee serve: %w", err)
	}
	defer srv.Close()
	fmt.Fprintf(stderr, "bee serve: the board %s, as %s. Open this link once to sign in (it works once, in one browser); interrupt (Ctrl-C) to stop:\n", b.Location(), person)
	if _, err := fmt.Fprintln(c.env.main.Stdout, srv.LoginURL()); err != nil {
		return fmt.Errorf("bee serve: print the link: %w", err)
	}
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return fmt.Errorf("bee serve: %w", err)
	}
	return errInterrupted
}

// Usage prints how to use `bee serve`.
func (c *ServeCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Serve the board page: a live view of the board in your browser, with forms
to post, cancel and re-address actions.

Usage:

	bee serve [--port N] [--from NAME]

It listens on 127.0.0.1 only and prints a link that signs one browser in,
once; the page then keeps a session cookie until the browser closes. It
posts, cancels and re-addresses as user:$USER unless --from says
otherwise. Interrupt it (Ctrl-C) to stop; bee then exits 130, as for any
interrupted command.

Flags:

`)
	printFlags(w, c.flagSet())
}
