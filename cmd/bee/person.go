package main

import (
	"context"
	"os/user"
	"strings"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// person is who runs a command that acts on the board as a person
// ("user:<name>"): from (a --from flag), else $USER, else $LOGNAME, else
// the account's name. cmd names the command for the error.
func (e *env) person(cmd, from string) (actions.Poster, error) {
	return e.personBy(cmd, "--from", from)
}

// personAs is person for the commands whose flag is --as (inbox, answer,
// decline).
func (e *env) personAs(cmd, as string) (actions.Poster, error) { return e.personBy(cmd, "--as", as) }

// personBy is person, the name given by the flag flagName.
func (e *env) personBy(cmd, flagName, from string) (actions.Poster, error) {
	name, what := strings.TrimPrefix(from, actions.UserPrefix), flagName
	for _, v := range []string{"USER", "LOGNAME"} {
		if name == "" {
			name, what = e.main.Getenv(v), "$"+v
		}
	}
	if name == "" {
		if u, err := user.Current(); err == nil {
			name, what = u.Username, "account name"
		}
	}
	hint := "bee " + cmd + " " + flagName + " NAME ..."
	if name == "" {
		return "", usagef(hint, "bee %s: who are you? $USER is empty", cmd)
	}
	if identity.CheckName(name) != nil {
		return "", usagef(hint, "bee %s: cannot %s as %s %q: a person's name %s", cmd, cmd, what, name, nameRule(name))
	}
	who, err := actions.User(name)
	if err != nil {
		return "", usagef(hint, "bee %s: cannot %s as %s %q: %v", cmd, cmd, what, name, err)
	}
	return who, nil
}

// changeAs opens the board and makes one change to the action id as the
// person from names (see person): the steps bee cancel and bee readdress
// share. cmd names the command in errors; a refusal is said by refusal.
func (e *env) changeAs(ctx context.Context, cmd, from, id string, change func(b actions.Board, who actions.Poster) (actions.Record, error)) (actions.Record, error) {
	who, err := e.person(cmd, from)
	if err != nil {
		return actions.Record{}, err
	}
	return e.changeBy(ctx, cmd, who, id, change)
}

// changeBy is changeAs for the person who.
func (e *env) changeBy(ctx context.Context, cmd string, who actions.Poster, id string, change func(b actions.Board, who actions.Poster) (actions.Record, error)) (actions.Record, error) {
	b, err := e.open(cmd, false)
	if err != nil {
		return actions.Record{}, err
	}
	defer b.Close()
	rec, err := change(b, who)
	if err != nil {
		return actions.Record{}, e.refusal(ctx, b, cmd, id, err)
	}
	return rec, nil
}
