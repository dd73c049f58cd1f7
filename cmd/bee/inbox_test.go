package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
)

// asker opens the board at path and joins an agent identity that asks.
func asker(t *testing.T, path string) (*board.Board, identity.ID) {
	t.Helper()
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	who := identity.ID("agent:lead#0000a5c0")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: who}))
	return b, who
}

func askQ(t *testing.T, b actions.Board, who identity.ID, to, title, body string) actions.Record {
	t.Helper()
	rec, err := b.Post(t.Context(), actions.Agent(who), actions.Draft{To: to, Title: title, Body: body})
	require.NoError(t, err)
	return rec
}

// bee inbox lists, oldest first, what waits for the person running it (or
// --as NAME): questions to them and to people, not others'; bee answer and
// bee decline end them, and the agent that asked hears of each once.
func TestMain_InboxAnswerDecline(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	b, lead := asker(t, path)
	mine := askQ(t, b, lead, "user:tester", "Approve the migration?", "It drops column x.")
	_ = askQ(t, b, lead, "user:alice", "For alice", "")
	anyone := askQ(t, b, lead, actions.People, "Which design?", "")
	_ = askQ(t, b, lead, "worker", "A job for agents", "")

	out := bee(t, path, "inbox")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 3, out)
	require.Regexp(t, `^ID\s+FROM\s+SINCE\s+FOR\s+TITLE$`, lines[0])
	require.Regexp(t, `^a-1\s+agent:lead#0000a5c0\s+\d+s\s+you\s+Approve the migration\?$`, lines[1])
	require.Regexp(t, `^a-3\s+agent:lead#0000a5c0\s+\d+s\s+people\s+Which design\?$`, lines[2])
	require.NotContains(t, out, "For alice")
	require.NotContains(t, out, "A job for agents")
	require.Contains(t, out, "bee answer ID TEXT")

	var qs []actions.Record
	require.NoError(t, json.Unmarshal([]byte(bee(t, path, "inbox", "--as", "alice", "--json")), &qs))
	require.Equal(t, []string{"a-2", "a-3"}, ids(qs), "alice's own and people's")

	// Answering someone else's question is refused, naming whom it is for.
	_, _, err := run(t, path, "", "answer", "a-2", "yes")
	require.Equal(t, exitNo, exitOf(err))
	require.ErrorContains(t, err, "is for user:alice, not user:tester")

	out = bee(t, path, "answer", mine.ID, "yes, tonight")
	require.Equal(t, "answered a-1, asked by agent:lead#0000a5c0: Approve the migration?\n", out)
	var rec actions.Record
	out, errOut, err := run(t, path, "the second,\nwith the cache\n", "answer", anyone.ID, "-", "--json", "--as", "bob")
	require.NoError(t, err, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, actions.Done, rec.State)
	require.Equal(t, "the second,\nwith the cache\n", rec.Result)
	require.Equal(t, "user:bob", rec.EndedBy)

	// The asker hears of both, once each.
	heard := map[string]string{}
	for range 2 {
		n, ok, err := b.Notice(t.Context(), lead, nil, 5*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		heard[n.Record.ID] = n.Record.Result
	}
	require.Equal(t, map[string]string{"a-1": "yes, tonight", "a-3": "the second,\nwith the cache\n"}, heard)
	_, ok, err := b.Notice(t.Context(), lead, nil, 100*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)

	// A decline needs a reason; with one, the question fails.
	q := askQ(t, b, lead, "user:tester", "The production password?", "")
	_, _, err = run(t, path, "", "decline", q.ID)
	require.Equal(t, exitUsage, exitOf(err))
	out = bee(t, path, "decline", q.ID, "--reason", "ask ops for a scoped token")
	require.Equal(t, "declined a-5, asked by agent:lead#0000a5c0: The production password?\n", out)
	got, err := b.Get(t.Context(), q.ID)
	require.NoError(t, err)
	require.Equal(t, actions.Failed, got.State)
	require.Equal(t, "ask ops for a scoped token", got.Reason)
	require.Equal(t, "user:tester", got.Holder)

	require.Equal(t, "nothing waits for user:tester on "+path+"\n", bee(t, path, "inbox"))
	require.Equal(t, "[]\n", bee(t, path, "inbox", "--json"))
}

func ids(recs []actions.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// bee inbox --watch prints what waits, then each new question as it
// arrives, with the terminal bell, and says when one leaves the inbox;
// other changes print nothing. With --json: JSON lines, no bell.
func TestMain_InboxWatch(t *testing.T) {
	t.Parallel()
	for _, asJSON := range []bool{false, true} {
		t.Run(map[bool]string{false: "text", true: "json"}[asJSON], func(t *testing.T) {
			t.Parallel()
			path := newBoard(t)
			b, lead := asker(t, path)
			first := askQ(t, b, lead, "user:tester", "Already waiting", "")
			stdout, stderr := newLineReader(), newLineReader()
			m := &Main{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Getenv: testEnv(nil)}
			ctx, cancel := context.WithCancel(t.Context())
			args := []string{"--board", path, "inbox", "--watch"}
			if asJSON {
				args = append(args, "--json")
			}
			var wg sync.WaitGroup
			var runErr error
			wg.Go(func() { runErr = m.Run(ctx, args) })
			defer func() {
				cancel()
				wg.Wait()
				stdout.close()
				stderr.close()
			}()

			require.Contains(t, stderr.next(t, 10*time.Second), "watching "+path+" for questions to user:tester")
			line := stdout.next(t, 10*time.Second)
			if asJSON {
				require.NotContains(t, line, bell)
				var r actions.Record
				require.NoError(t, json.Unmarshal([]byte(line), &r))
				require.Equal(t, first.ID, r.ID)
			} else {
				require.Regexp(t, "^\a\\d\\d:\\d\\d:\\d\\d  agent:lead#0000a5c0 asks you: Already waiting  \\(bee answer a-1 TEXT\\)$", line)
			}

			// Not for tester: nothing. Then one for people: a line.
			askQ(t, b, lead, "", "for agents", "")
			askQ(t, b, lead, "user:alice", "for alice", "")
			second := askQ(t, b, lead, actions.People, "Which design?", "")
			line = stdout.next(t, 10*time.Second)
			if asJSON {
				var r actions.Record
				require.NoError(t, json.Unmarshal([]byte(line), &r))
				require.Equal(t, second.ID, r.ID)
			} else {
				require.Regexp(t, "^\a.*agent:lead#0000a5c0 asks people: Which design\\?  \\(bee answer a-4 TEXT\\)$", line)
			}

			// Answered elsewhere, it leaves the inbox.
			_, err := b.Answer(t.Context(), "user:bob", second.ID, "the first")
			require.NoError(t, err)
			line = stdout.next(t, 10*time.Second)
			if asJSON {
				var r actions.Record
				require.NoError(t, json.Unmarshal([]byte(line), &r))
				require.Equal(t, actions.Done, r.State)
			} else {
				require.Regexp(t, `^\d\d:\d\d:\d\d  a-4 is no longer waiting: done by user:bob$`, line)
			}

			cancel()
			wg.Wait()
			require.Equal(t, exitInterrupted, exitOf(runErr), "inbox --watch ends as interrupted: %v", runErr)
		})
	}
}

// A question's hostile title reaches the terminal inert in the inbox and
// its watch.
func TestMain_InboxPrintsEscaped(t *testing.T) {
	t.Parallel()
	path := newBoard(t)
	b, lead := asker(t, path)
	askQ(t, b, lead, "user:tester", "ask", "")
	rewriteTitle(t, path, 1, hostile)
	out := bee(t, path, "inbox")
	requireInert(t, out)
	require.Contains(t, out, `\x1b]52`)
}
