package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tractat-us/bee/actions"
)

// AnswerCommand is `bee answer`: a person answers a question addressed to
// them (or to people); the action is done, with the answer as its result,
// and the agent that asked is woken with it.
type AnswerCommand struct {
	env *env

	as     string
	asJSON bool
}

func (c *AnswerCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("answer")
	fs.StringVar(&c.as, "as", "", "answer as this person (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print the answered action as JSON")
	return fs
}

// Run answers the question named.
func (c *AnswerCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	const hint = `bee answer a-7 "yes, go ahead" (quote the answer; - reads it from stdin)`
	if fs.NArg() != 2 {
		return usagef(hint, "bee answer: want an action id and the answer, got %d arguments", fs.NArg())
	}
	id, text := fs.Arg(0), fs.Arg(1)
	if text == "-" {
		var err error
		if text, err = readStdin(c.env.main.Stdin, "answer", "the answer"); err != nil {
			return err
		}
	}
	if strings.TrimSpace(text) == "" {
		return usagef(hint, "bee answer: the answer is blank; write something the agent can act on")
	}
	who, err := c.env.personAs("answer", c.as)
	if err != nil {
		return err
	}
	rec, err := c.env.changeBy(ctx, "answer", who, id, func(b actions.Board, who actions.Poster) (actions.Record, error) {
		return b.Answer(ctx, who, id, text)
	})
	if err != nil {
		return err
	}
	return c.env.printRecord(c.asJSON, rec, fmt.Sprintf("answered %s, asked by %s: %s", safe(rec.ID), safe(rec.From), oneLine(rec.Title, 60)))
}

// Usage prints how to use `bee answer`.
func (c *AnswerCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Answer a question an agent asked you (bee inbox lists them): the action is
done, with your answer as its result, and the agent that asked is woken with
it. A question for people can be answered by any person, once.

Usage:

	bee answer [--as NAME] [--json] ID TEXT

TEXT is the answer, at most 64 KiB; "-" reads it from stdin.

Flags:

`)
	printFlags(w, c.flagSet())
}

// DeclineCommand is `bee decline`: a person declines a question addressed
// to them (or to people); the action fails with the reason, and the agent
// that asked is woken with it.
type DeclineCommand struct {
	env *env

	reason string
	as     string
	asJSON bool
}

func (c *DeclineCommand) flagSet() *flag.FlagSet {
	fs := c.env.flags("decline")
	fs.StringVar(&c.reason, "reason", "", "why you decline it, for the agent that asked (required, at most 64 KiB)")
	fs.StringVar(&c.as, "as", "", "decline as this person (default $USER)")
	fs.BoolVar(&c.asJSON, "json", false, "print the declined action as JSON")
	return fs
}

// Run declines the question named.
func (c *DeclineCommand) Run(ctx context.Context, args []string) error {
	fs := c.flagSet()
	if err := c.env.parse(fs, args, c.Usage); err != nil {
		return helped(err)
	}
	const hint = `bee decline a-7 --reason "ask ops for a scoped token instead"`
	switch {
	case fs.NArg() != 1:
		return usagef(hint, "bee decline: want one action id, got %d arguments", fs.NArg())
	case strings.TrimSpace(c.reason) == "":
		return usagef(hint, "bee decline: say why with --reason; the agent that asked reads it")
	}
	who, err := c.env.personAs("decline", c.as)
	if err != nil {
		return err
	}
	id := fs.Arg(0)
	rec, err := c.env.changeBy(ctx, "decline", who, id, func(b actions.Board, who actions.Poster) (actions.Record, error) {
		return b.Decline(ctx, who, id, c.reason)
	})
	if err != nil {
		return err
	}
	return c.env.printRecord(c.asJSON, rec, fmt.Sprintf("declined %s, asked by %s: %s", safe(rec.ID), safe(rec.From), oneLine(rec.Title, 60)))
}

// Usage prints how to use `bee decline`.
func (c *DeclineCommand) Usage() {
	w := c.env.main.Stdout
	fmt.Fprint(w, `Decline a question an agent asked you (bee inbox lists them): the action
fails, with your reason, and the agent that asked is woken with it. Nobody
else answers it after that.

Usage:

	bee decline --reason TEXT [--as NAME] [--json] ID

Flags:

`)
	printFlags(w, c.flagSet())
}

// readStdin reads what cmd takes from stdin (what names it), at most
// actions.MaxResultLen bytes.
func readStdin(r io.Reader, cmd, what string) (string, error) {
	raw, err := io.ReadAll(io.LimitReader(r, actions.MaxResultLen+1))
	if err != nil {
		return "", fmt.Errorf("bee %s: read %s from stdin: %w", cmd, what, err)
	}
	if len(raw) > actions.MaxResultLen {
		return "", &cliError{code: exitUsage, err: actions.ErrTooLong,
			msg:  fmt.Sprintf("bee %s: %s on stdin is more than %d bytes (64 KiB), the most an action holds", cmd, what, actions.MaxResultLen),
			hint: "put the detail in a file, and name the file in a shorter " + strings.TrimPrefix(what, "the ")}
	}
	return string(raw), nil
}
