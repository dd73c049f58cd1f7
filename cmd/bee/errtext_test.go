package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/pgtest"
)

// An errCase is one way to make bee fail, for the test of every error
// text bee can show.
type errCase struct {
	name  string
	args  []string          // after --board BOARD, unless noBoard
	board string            // the board; the shared test board when ""
	env   map[string]string // besides USER=tester; a key with "" is set but empty
	stdin string
	// noBoard leaves --board out: args say where the board is.
	noBoard bool
	// cause, when set, must match the text's first clauses (up to the
	// first ";" or "?"): the cause said first.
	cause *regexp.Regexp
	// boardSide, when set, says which package's words keep the text from
	// passing: the case runs and shows its text and what is wrong with
	// it, but is skipped until that package is fixed. Clear it then, and
	// the case counts.
	boardSide string
}

// stopWords are words too small to count as a repeated phrase on their
// own.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("a an the to of is it in on at for and or be by its as this that with not no was has been there yet from into only once one any all so if when than then what which who else are do does") {
		stopWords[w] = true
	}
}

// literal matches what a message quotes rather than says: quoted text,
// paths, URLs, identities, action ids, numbers and flags. Their words
// are not the message's own.
var literal = regexp.MustCompile(`"[^"]*"|'[^']*'|\S*[/:#@]\S*|\ba-[0-9]+\b|--?[a-z][a-z-]*|\$[A-Z_]+|[0-9]+\S*`)

// clauseBreak splits a message into clauses.
var clauseBreak = regexp.MustCompile(`[:;()\n]|, | - `)

// repeats returns what msg (bee's stderr: an "Error:" line and maybe a
// "Try:" line) says more than once: within a line, a word twice in a row
// ("bee bee readdress"), a clause twice ("bee cancel: bee cancel: ..."),
// or a pair of words, not both small, in two clauses ("no board at X:
// ...: no board there"); across the lines, a clause of the hint that the
// error says already. A hint may name the command again ("Try: bee show
// a-1").
func repeats(msg string) []string {
	var found []string
	seen := map[string]bool{} // the error line's clauses
	for n, line := range strings.Split(msg, "\n") {
		clauses := map[string]bool{}
		pairs := map[string]int{} // pair -> the clause it was first seen in
		for i, clause := range clauseBreak.Split(line, -1) {
			words := strings.Fields(strings.ToLower(literal.ReplaceAllString(clause, " | ")))
			for j := range words {
				words[j] = strings.Trim(words[j], ".,!?")
			}
			norm := strings.Join(words, " ")
			if norm != "" && norm != "|" && norm != "error" && norm != "try" {
				if clauses[norm] || (n > 0 && seen[norm] && !isCommandName(norm)) {
					found = append(found, "clause "+strconv.Quote(norm))
				}
				clauses[norm] = true
				if n == 0 {
					seen[norm] = true
				}
			}
			for j := 0; j+1 < len(words); j++ {
				a, b := words[j], words[j+1]
				if a == "|" || b == "|" || a == "" || b == "" {
					continue
				}
				if a == b {
					found = append(found, "word "+strconv.Quote(a)+" twice")
				}
				if stopWords[a] && stopWords[b] {
					continue
				}
				p := a + " " + b
				if first, ok := pairs[p]; ok && first != i {
					found = append(found, "phrase "+strconv.Quote(p))
				} else if !ok {
					pairs[p] = i
				}
			}
		}
	}
	return found
}

// isCommandName reports whether s is "bee" or "bee <command>".
func isCommandName(s string) bool {
	rest, ok := strings.CutPrefix(s, "bee")
	return ok && (rest == "" || slices.Contains(commands, strings.TrimSpace(rest)))
}

func TestRepeats(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`bee cancel: bee cancel: who are you? $USER is empty`,
		`no board at /x/board.db: nothing has been posted there yet: no board there (check --board and $BEE_BOARD; bee post creates it)`,
		`no board there: no board at postgres://u@h/db: nothing has been posted there yet: no board in the database`,
		`bee bee readdress: who are you?`,
		"Error: bee post: to agent:x#12345678: it never joined\nTry: post to the agent name x; it never joined",
	} {
		require.NotEmpty(t, repeats(bad), "%s", bad)
	}
	for _, good := range []string{
		"Error: bee show: no action \"A-1\" on the board at /tmp/x/board.db\nTry: action ids are lower case: bee show a-1",
		"Error: bee backup: the folder /tmp/a/b does not exist\nTry: create it first: mkdir -p /tmp/a/b",
		"Error: bee post: the folder /tmp/a of the board /tmp/a/board.db does not exist\nTry: check --board, or create the folder first: mkdir -p /tmp/a",
	} {
		require.Empty(t, repeats(good), "%s", good)
	}
}

// Every error bee can show says its cause once, first, and what to do: no
// clause or phrase twice, no sentinel's name tacked on, no Go error
// chain's "context deadline exceeded". The cases drive every command into
// every refusal it has; add one with each new error.
func TestMain_ErrorTextsSayEachThingOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := exitBoard(t) // a-1 open, a-2 claimed, a-3 done, a-4 failed, a-5 cancelled
	b, err := board.Open(path, nil)
	require.NoError(t, err)
	defer b.Close()
	gone := identity.ID("agent:gone#00000001")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: gone, PID: os.Getpid()}))
	require.NoError(t, b.Depart(t.Context(), gone))
	alive := identity.ID("agent:gone#0000000a")
	require.NoError(t, b.Join(t.Context(), actions.Member{ID: alive, PID: os.Getpid()}))
	_, err = b.Reserve(t.Context(), "user:ann", actions.ReserveRequest{Repo: "github.com/x/held", Patterns: []string{"src"}, Reason: "mine"})
	require.NoError(t, err)
	missing := filepath.Join(dir, "missing.db")
	garbage := filepath.Join(dir, "garbage.db")
	require.NoError(t, os.WriteFile(garbage, bytes.Repeat([]byte("not a board "), 1000), 0o600))
	folder := filepath.Join(dir, "a-folder.db")
	require.NoError(t, os.Mkdir(folder, 0o700))
	exists := filepath.Join(dir, "exists.db")
	require.NoError(t, os.WriteFile(exists, nil, 0o600))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	takenPort := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	long := strings.Repeat("x", actions.MaxBodyLen*2)

	cases := []errCase{
		{name: "unknown command", args: []string{"frobnicate"}},
		{name: "command in capitals", args: []string{"LIST"}},
		{name: "no command", args: []string{}},
		{name: "command flag before the command", args: []string{"--json", "list"}, noBoard: true},
		{name: "unknown flag", args: []string{"list", "--bogus"}},
		{name: "empty --board", args: []string{"--board", "", "list"}, noBoard: true},
		{name: "empty $BEE_BOARD", args: []string{"list"}, noBoard: true, env: map[string]string{board.EnvPath: ""}},
		{name: "board in a missing folder", args: []string{"post", "t"}, board: filepath.Join(dir, "made", "up", "board.db")},
		{name: "no board there", args: []string{"list"}, board: missing},
		{name: "board is a folder", args: []string{"list"}, board: folder},
		{name: "board is not a database", args: []string{"list"}, board: garbage},
		{name: "cancel as a bad name", args: []string{"cancel", "--from", "a b", "a-1"}},
		{name: "readdress as a bad name", args: []string{"readdress", "--from", "a b", "a-1", "--to", "x"}},

		{name: "post: no title", args: []string{"post"}},
		{name: "post: blank title", args: []string{"post", "   "}},
		{name: "post: three arguments", args: []string{"post", "t", "b", "c"}},
		{name: "post: title too long", args: []string{"post", strings.Repeat("x", 300)}},
		{name: "post: title of two lines", args: []string{"post", "two\nlines"}},
		{name: "post: control character in the title", args: []string{"post", "bell\a"}},
		{name: "post: NUL in the title", args: []string{"post", "nul\x00"}},
		{name: "post: body not UTF-8", args: []string{"post", "t", "\xff"}},
		{name: "post: body too long", args: []string{"post", "t", long}},
		{name: "post: body on stdin too long", args: []string{"post", "t", "-"}, stdin: long},
		{name: "post: --to a bad person", args: []string{"post", "--to", "user:a b", "t"}},
		{name: "post: --to user:people", args: []string{"post", "--to", "user:people", "t"}},
		{name: "post: --to a bad identity", args: []string{"post", "--to", "agent:x#12", "t"}},
		{name: "post: --to a bad name", args: []string{"post", "--to", "two words", "t"}},
		{name: "post: --from a bad name", args: []string{"post", "--from", "a b", "t"}},
		{name: "post: to an identity that never joined", args: []string{"post", "--to", "agent:nobody#12345678", "t"}},
		{name: "post: to a departed identity with a live one", args: []string{"post", "--to", string(gone), "t"}},

		{name: "list: argument", args: []string{"list", "x"}},
		{name: "list: --all and --state", args: []string{"list", "--all", "--state", "open"}},
		{name: "list: unknown state", args: []string{"list", "--state", "lost"}},

		{name: "show: no id", args: []string{"show"}},
		{name: "show: unknown id", args: []string{"show", "a-99"}},
		{name: "show: id in capitals", args: []string{"show", "A-1"}},
		{name: "show: bare number", args: []string{"show", "7"}},

		{name: "watch: argument", args: []string{"watch", "x"}},
		{name: "agents: argument", args: []string{"agents", "x"}},

		{name: "wait: no ids", args: []string{"wait"}},
		{name: "wait: negative timeout", args: []string{"wait", "a-1", "--timeout", "-5s"}},
		{name: "wait: bad timeout", args: []string{"wait", "a-1", "--timeout", "soon"}},
		{name: "wait: unknown id", args: []string{"wait", "a-999", "--timeout", "1s"}},
		{name: "wait: failed and cancelled", args: []string{"wait", "a-4", "a-5"}},
		{name: "wait: timeout", args: []string{"wait", "a-1", "--timeout", "50ms"}},
		{name: "wait: timeout 0", args: []string{"wait", "a-1", "--timeout", "0"}},

		{name: "cancel: no id", args: []string{"cancel"}},
		{name: "cancel: unknown id", args: []string{"cancel", "a-77"}},
		{name: "cancel: done", args: []string{"cancel", "a-3"}},
		{name: "cancel: failed", args: []string{"cancel", "a-4"}},
		{name: "cancel: cancelled", args: []string{"cancel", "a-5"}},

		{name: "readdress: no --to", args: []string{"readdress", "a-1"}},
		{name: "readdress: --to and --anyone", args: []string{"readdress", "a-1", "--to", "x", "--anyone"}},
		{name: "readdress: claimed", args: []string{"readdress", "a-2", "--to", "reviewer"}},
		{name: "readdress: ended", args: []string{"readdress", "a-3", "--to", "reviewer"}},
		{name: "readdress: unknown id", args: []string{"readdress", "a-9", "--to", "reviewer"}},
		{name: "readdress: never joined", args: []string{"readdress", "a-1", "--to", "agent:x#12345678"}},
		{name: "readdress: departed", args: []string{"readdress", "a-1", "--to", string(gone)}},

		{name: "reservations: argument", args: []string{"reservations", "x"}},
		{name: "reservations: --all and --repo", args: []string{"reservations", "--all", "--repo", "github.com/x/r"}},
		{name: "reservations: bad repository name", args: []string{"reservations", "--repo", "bell\a"}},
		{name: "reservations check: not JSON", args: []string{"reservations", "check", "--json"}, stdin: "nope"},
		{name: "reservations check: relative path", args: []string{"reservations", "check", "--json"}, stdin: `{"paths":["x.go"]}`},
		{name: "reserve: no paths", args: []string{"reserve", "--reason", "r"}},
		{name: "reserve: no reason", args: []string{"reserve", "src"}},
		{name: "reserve: escaping the root", args: []string{"reserve", "--repo", "github.com/x/r", "--reason", "r", "../x"}, boardSide: "actions/pathglob"},
		{name: "reserve: reason of two lines", args: []string{"reserve", "--repo", "github.com/x/r", "--reason", "two\nlines", "src"}},
		{name: "reserve: held", args: []string{"reserve", "--repo", "github.com/x/held", "--from", "bob", "--reason", "r", "src/x"}},
		{name: "release: --all with patterns", args: []string{"release", "--all", "src"}},
		{name: "release: bad pattern", args: []string{"release", "--repo", "github.com/x/r", "a//b"}},
		{name: "inbox: argument", args: []string{"inbox", "x"}},
		{name: "inbox as a bad name", args: []string{"inbox", "--as", "a b"}},
		{name: "answer: no answer", args: []string{"answer", "a-1"}},
		{name: "answer: blank answer", args: []string{"answer", "a-1", " "}},
		{name: "answer: not a question", args: []string{"answer", "a-1", "yes"}},
		{name: "answer: unknown id", args: []string{"answer", "a-99", "yes"}},
		{name: "answer: ended", args: []string{"answer", "a-3", "yes"}},
		{name: "answer: too long on stdin", args: []string{"answer", "a-1", "-"}, stdin: long},
		{name: "decline: no reason", args: []string{"decline", "a-1"}},
		{name: "decline: not a question", args: []string{"decline", "a-1", "--reason", "no"}},

		{name: "backup: no file", args: []string{"backup"}},
		{name: "backup: file exists", args: []string{"backup", exists}},
		{name: "backup: folder missing", args: []string{"backup", filepath.Join(dir, "nope", "copy.db")}},
		{name: "backup: PostgreSQL", args: []string{"backup", filepath.Join(dir, "copy.db")}, board: "postgres://bee:secret@127.0.0.1:1/bee"},

		{name: "serve: bad port", args: []string{"serve", "--port", "70000"}},
		{name: "serve: port taken", args: []string{"serve", "--port", takenPort}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkErrCase(t, path, c) })
	}
	// On PostgreSQL, when the test has a server: in a subtest of its own,
	// which skips without one.
	t.Run("postgres", func(t *testing.T) {
		for _, c := range postgresErrCases(t) {
			t.Run(c.name, func(t *testing.T) { checkErrCase(t, path, c) })
		}
	})
}

// checkErrCase runs c and checks what bee says.
func checkErrCase(t *testing.T, path string, c errCase) {
	t.Helper()
	text, code := errText(t, path, c)
	t.Logf("exit %d:\n%s", code, text)
	require.NotEqual(t, exitOK, code, "the case fails")
	wrong := errTextProblems(text, c)
	if c.boardSide != "" {
		if len(wrong) > 0 {
			t.Skipf("%s's words, left to that package: %v", c.boardSide, wrong)
		}
		t.Fatalf("%s says it right now: clear boardSide so that the case counts", c.boardSide)
	}
	require.Empty(t, wrong, "%s", text)
}

// errTextProblems says what is wrong with text, the stderr of c.
func errTextProblems(text string, c errCase) []string {
	var wrong []string
	if !strings.HasPrefix(text, "Error: ") || strings.Count(text, "Error: ") != 1 {
		wrong = append(wrong, "not one \"Error: \" line first")
	}
	wrong = append(wrong, repeats(text)...)
	for _, s := range sentinels {
		if strings.HasSuffix(strings.SplitN(text, "\n", 2)[0], ": "+s.Error()) {
			wrong = append(wrong, "ends in a sentinel's name: "+s.Error())
		}
	}
	for _, bad := range []string{"context deadline exceeded", "context canceled", "secret"} {
		if strings.Contains(text, bad) {
			wrong = append(wrong, "says "+strconv.Quote(bad))
		}
	}
	if c.cause != nil {
		first, _, _ := strings.Cut(text, ";")
		first, _, _ = strings.Cut(first, "?")
		if !c.cause.MatchString(first) {
			wrong = append(wrong, "the cause does not come first: want "+c.cause.String())
		}
	}
	return wrong
}

// errText runs the case and returns what bee shows on stderr, and its
// exit code.
func errText(t *testing.T, path string, c errCase) (string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"USER": "tester"}
	for k, v := range c.env {
		env[k] = v
	}
	m := &Main{
		Stdin: strings.NewReader(c.stdin), Stdout: &stdout, Stderr: &stderr,
		Getenv:    testEnv(env),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	}
	args := c.args
	if !c.noBoard {
		where := c.board
		if where == "" {
			where = path
		}
		args = append([]string{"--board", where}, args...)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := m.Run(ctx, args)
	code := exitCode(err, &stderr)
	return strings.TrimSuffix(stderr.String(), "\n"), code
}

// postgresErrCases are the error cases of a board on PostgreSQL, when the
// test has a server.
func postgresErrCases(t *testing.T) []errCase {
	c := pgtest.Shared(t)
	if !c.Owned() {
		return nil // an external server's roles and TLS are unknown
	}
	empty := c.URLFor(c.NewDBFor(t, pgtest.PasswordRole), pgtest.PasswordRole, c.Password, "")
	wrong := c.URLFor(c.NewDBFor(t, pgtest.PasswordRole), pgtest.PasswordRole, "not-the-secret", "")
	tls := strings.Replace(empty, "sslmode=disable", "sslmode=verify-full", 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := fmt.Sprintf("postgres://bee@%s/bee?sslmode=disable", l.Addr())
	require.NoError(t, l.Close())
	return []errCase{
		{name: "postgres: no board in the database", args: []string{"list"}, board: empty},
		{name: "postgres: wrong password", args: []string{"list"}, board: wrong},
		{name: "postgres: no server there", args: []string{"list"}, board: closed, cause: regexp.MustCompile(`connection refused`)},
		{name: "postgres: TLS asked of a server without it", args: []string{"list"}, board: tls,
			cause: regexp.MustCompile(`(?i)\b(TLS|SSL)\b`)},
	}
}
