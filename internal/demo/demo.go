// Package demo is bee's quick-start demo (scripts/demo runs it): a person
// posts an action with the bee command, a real bee-mcp bridge, driven over
// MCP the way Claude Code drives it, waits for the action, claims it and
// finishes it, and the board shows it done.
//
// The demo never touches work it did not make. It posts one action, for an
// agent name made for this run (demo-<6 hex>), and checks that the action
// its bridge claimed is that one: a claim of anything else is given back at
// once, its own action is cancelled, and the demo fails, saying so. On a board that already holds work
// (Config.Shared) it first refuses when an action for anyone is open or
// claimed, since its bridge, like any, takes the oldest action it may.
// Its bridge registers in its own run directory, so a Claude Code session
// running the demo keeps its /clear.
//
// What it prints is meant for a person reading along: each step, the
// command or tool it calls, and the results in the order of the steps.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/internal/version"
)

// Config says where the demo's commands and board are.
type Config struct {
	// Bin is the directory holding the bee and bee-mcp commands. Required.
	Bin string
	// Board is the board file. Required.
	Board string
	// Shared says the board may hold other work: the demo then refuses a
	// board where its bridge could take someone else's action first.
	// Otherwise the board is the demo's own, fresh one.
	Shared bool
	// RunDir is the bridge's run directory. Required: the demo's bridge
	// must not register in the run directory of the session running it.
	RunDir string
	// Out receives what the demo shows. Required.
	Out io.Writer
	// Timeout bounds the whole demo; zero means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds a demo run: the bridge starts in well under a
// second and the wait is bounded by waitSeconds.
const DefaultTimeout = 60 * time.Second

// waitSeconds is the bound the demo's agent passes to bee_wait_action.
const waitSeconds = 10

const (
	title  = "Say hello"
	body   = "Reply with a friendly greeting."
	result = "Hello from the demo agent!"
)

// Run runs the demo. Its error says, for a person, what went wrong.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	d := &demo{cfg: cfg, out: cfg.Out}
	err := d.run(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the demo did not finish within %v (a very busy machine?): %w", cfg.Timeout, err)
	}
	return err
}

type demo struct {
	cfg   Config
	out   io.Writer
	agent string
}

func (d *demo) run(ctx context.Context) error {
	for _, name := range []string{"bee", "bee-mcp"} {
		if _, err := os.Stat(filepath.Join(d.cfg.Bin, name)); err != nil {
			return fmt.Errorf("%s is not in %s (build it: go install ./cmd/...): %w", name, d.cfg.Bin, err)
		}
	}
	agent, err := newAgentName()
	if err != nil {
		return err
	}
	d.agent = agent

	d.printf("bee demo: a person posts an action; an agent's bridge waits for it, claims\n")
	d.printf("it and finishes it.\n\n")
	d.printf("commands:  %s, %s\n", filepath.Join(d.cfg.Bin, "bee"), filepath.Join(d.cfg.Bin, "bee-mcp"))
	d.printf("board:     %s\n", d.cfg.Board)
	if d.cfg.Shared {
		d.printf("           the board you named; the demo touches only the action it posts\n")
	} else {
		d.printf("           a fresh board for this demo, removed when it ends; your boards\n")
		d.printf("           (~/.bee/board.db, $BEE_BOARD) are not touched\n")
	}
	d.printf("agent:     %s (a name made for this run: the action is for it alone)\n", agent)

	if d.cfg.Shared {
		if err := d.checkShared(ctx); err != nil {
			return err
		}
	}

	d.step(1, "A person posts an action for agent %s:", agent)
	posted, err := d.post(ctx)
	if err != nil {
		return err
	}

	d.step(2, "Claude Code starts one bridge (bee-mcp) per session; the demo starts one\n   the same way and talks MCP to it:")
	if err := d.drive(ctx, posted); err != nil {
		return err
	}

	d.step(5, "The bridge has ended (its identity left the board). The action now:")
	show, err := d.bee(ctx, "show", posted.ID)
	if err != nil {
		return err
	}
	d.indent("   ", show)
	d.printf("\nDone. Next: use bee from Claude Code (README.md, \"Use it with Claude Code\").\n")
	return nil
}

// newAgentName returns demo-<6 hex>, a name no other agent uses.
func newAgentName() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make an agent name: %w", err)
	}
	return "demo-" + hex.EncodeToString(b[:]), nil
}

// checkShared refuses a board where the demo's bridge could claim someone
// else's action: a bridge takes the oldest action it may, and every bridge
// may take an action for anyone (a claimed one too, once its holder is
// gone). Actions for an agent name or an identity are safe: the demo's
// name is new.
func (d *demo) checkShared(ctx context.Context) error {
	if _, err := os.Stat(d.cfg.Board); errors.Is(err, os.ErrNotExist) {
		return nil // bee post creates it, and says so
	}
	out, err := d.bee(ctx, "list", "--json")
	if err != nil {
		return err
	}
	var recs []actions.Record
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		return fmt.Errorf("read bee list --json: %w", err)
	}
	var risky []string
	for _, r := range recs {
		if r.To == "" && (r.State == actions.Open || r.State == actions.Claimed) {
			risky = append(risky, fmt.Sprintf("%s (%s)", r.ID, r.State))
		}
	}
	if len(risky) > 0 {
		return fmt.Errorf("the board at %s has actions for anyone that are not done: %s. "+
			"The demo's bridge, like any bridge, could take one of them before its own, "+
			"so it leaves this board alone. Run scripts/demo without --board (it makes a fresh board), "+
			"or name a board with no open or claimed action for anyone",
			d.cfg.Board, strings.Join(risky, ", "))
	}
	return nil
}

// post posts the demo's action with bee and returns it.
func (d *demo) post(ctx context.Context) (actions.Record, error) {
	args := []string{"post", "--to", d.agent, "--json", title, body}
	d.printf("   $ bee --board %s %s\n", quote(d.cfg.Board), quoteAll(args))
	out, err := d.bee(ctx, args...)
	if err != nil {
		return actions.Record{}, err
	}
	var rec actions.Record
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.ID == "" {
		return actions.Record{}, fmt.Errorf("bee post printed no action (%v): %s", err, out)
	}
	d.printf("   -> posted %s for %s: %s\n", rec.ID, rec.To, rec.Title)
	return rec, nil
}

// bee runs the bee command on the board and returns its stdout; what it
// says on stderr (such as "created a new board at ...") is shown.
func (d *demo) bee(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.cfg.Bin, "bee"), append([]string{"--board", d.cfg.Board}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return "", fmt.Errorf("bee %s failed (%v): %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	d.indent("   ", stderr.String())
	return stdout.String(), nil
}

// drive starts a bridge for the demo's agent and plays the agent's part:
// wait, check the claim is the posted action, finish it.
func (d *demo) drive(ctx context.Context, posted actions.Record) error {
	args := []string{"--agent", d.agent, "--board", d.cfg.Board, "--source", "board", "--run-dir", d.cfg.RunDir, "--log-level", "error"}
	d.printf("   $ bee-mcp %s\n", quoteAll(args))
	cmd := exec.Command(filepath.Join(d.cfg.Bin, "bee-mcp"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "bee-demo", Version: version.Version}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return fmt.Errorf("start bee-mcp: %w%s", err, said(&stderr))
	}
	// Closing ends the bridge: its stdin closes, it departs and exits.
	defer cs.Close()
	fail := func(err error) error {
		cs.Close()
		return fmt.Errorf("%w%s", err, said(&stderr))
	}

	if err := d.showTools(ctx, cs); err != nil {
		return fail(err)
	}
	if err := d.whoami(ctx, cs); err != nil {
		return fail(err)
	}

	d.step(3, "The agent calls bee_wait_action: it waits up to %d s for an action it may\n   take, and claims it:", waitSeconds)
	d.printf("   bee_wait_action {\"timeoutSeconds\":%d}\n", waitSeconds)
	var page actions.Page
	text, err := d.call(ctx, cs, "bee_wait_action", map[string]any{"timeoutSeconds": waitSeconds}, &page)
	if err != nil {
		return fail(err)
	}
	if len(page.Records) == 0 {
		return fail(fmt.Errorf("the bridge found no action for %s within %d s, though %s was posted for it: %s", d.agent, waitSeconds, posted.ID, text))
	}
	got := page.Records[0]
	if got.ID != posted.ID {
		return fail(d.claimedAnother(ctx, cs, got, posted))
	}
	d.printf("   -> claimed %s, the action the person posted. What the agent reads:\n", got.ID)
	d.indent("   | ", text)
	d.printf("   (The cursor marks the agent's place on the board; it passes it to its next wait.)\n")

	d.step(4, "The agent does the work and calls bee_finish_action:")
	args2 := map[string]any{"id": got.ID, "result": result}
	raw, _ := json.Marshal(args2)
	d.printf("   bee_finish_action %s\n", raw)
	text, err = d.call(ctx, cs, "bee_finish_action", args2, nil)
	if err != nil {
		return fail(err)
	}
	d.indent("   -> ", text)

	if err := cs.Close(); err != nil {
		return fmt.Errorf("the bridge did not end cleanly: %w%s", err, said(&stderr))
	}
	return nil
}

// showTools prints the tools the bridge serves, by name.
func (d *demo) showTools(ctx context.Context, cs *mcp.ClientSession) error {
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the bridge's tools: %w", err)
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	server := "bee-mcp"
	if init := cs.InitializeResult(); init != nil && init.ServerInfo != nil {
		server += " " + init.ServerInfo.Version
	}
	d.printf("   %s serves %d tools:\n", server, len(names))
	d.indent("     ", wrap(strings.Join(names, ", "), 70))
	return nil
}

// whoami prints who the bridge says this session is, and refuses a bridge
// that serves another source than the board.
func (d *demo) whoami(ctx context.Context, cs *mcp.ClientSession) error {
	var who struct {
		Identity  string `json:"identity"`
		Source    string `json:"source"`
		ClaudePID *int   `json:"claudePid"`
	}
	if _, err := d.call(ctx, cs, "bee_whoami", map[string]any{}, &who); err != nil {
		return err
	}
	if who.Source != "board" {
		return fmt.Errorf("the bridge serves the %q source, not the board; check BEE_SOURCE in the environment", who.Source)
	}
	d.printf("   bee_whoami: this session is %s on the board.\n", who.Identity)
	if who.ClaudePID == nil {
		d.printf("   (No Claude Code started this bridge, so /clear cannot reach it: expected here.)\n")
	} else {
		d.printf("   (Claude Code %d runs this demo; the demo's bridge registers in its own run\n", *who.ClaudePID)
		d.printf("   directory, so that session's /clear still reaches its own bridge.)\n")
	}
	return nil
}

// claimedAnother is the error when the bridge claimed got, not the demo's
// posted action: it gives got back (never keep someone else's work) and
// calls off the demo's own action, and says what came of both.
func (d *demo) claimedAnother(ctx context.Context, cs *mcp.ClientSession, got, posted actions.Record) error {
	// Never keep someone else's work: give it back before anything else.
	_, rerr := d.call(ctx, cs, "bee_release_action", map[string]any{"id": got.ID}, nil)
	what := "gave it back at once: it is open again, as it was"
	if rerr != nil {
		what = fmt.Sprintf("could not give it back (%v): it goes back to the board when the bridge ends", rerr)
	}
	// The demo's own action is of no use to anyone: call it off.
	mine := fmt.Sprintf("the demo cancelled its own %s", posted.ID)
	if _, cerr := d.bee(ctx, "cancel", posted.ID, "--reason", "the demo's bridge claimed another action first"); cerr != nil {
		mine = fmt.Sprintf("%s stays open for %s, which nobody else uses (%v)", posted.ID, d.agent, cerr)
	}
	return fmt.Errorf("the bridge claimed %s (%q from %s), not the demo's %s; it %s. And %s",
		got.ID, got.Title, got.From, posted.ID, what, mine)
}

// call calls a tool and returns what the agent reads of its answer: the
// structured result, indented (Claude Code hands the model a tool's
// structured content, not its text); structured, when not nil, receives it
// decoded. A tool error is an error.
func (d *demo) call(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any, structured any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("call %s: %w", tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s failed: %s", tool, text.String())
	}
	raw, err := json.MarshalIndent(res.StructuredContent, "", "  ")
	if err == nil && structured != nil {
		err = json.Unmarshal(raw, structured)
	}
	if err != nil {
		return "", fmt.Errorf("read the result of %s: %w", tool, err)
	}
	return string(raw), nil
}

// said returns what the bridge wrote on stderr, for an error.
func said(stderr *bytes.Buffer) string {
	s := strings.TrimSpace(stderr.String())
	if s == "" {
		return ""
	}
	return "\nbee-mcp said:\n" + s
}

func (d *demo) printf(format string, args ...any) {
	fmt.Fprintf(d.out, format, args...)
}

func (d *demo) step(n int, format string, args ...any) {
	d.printf("\n%d. %s\n", n, fmt.Sprintf(format, args...))
}

// indent prints every line of text behind prefix.
func (d *demo) indent(prefix, text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	for line := range strings.SplitSeq(text, "\n") {
		d.printf("%s\n", strings.TrimRight(prefix+line, " "))
	}
}

// wrap breaks a comma-separated list into lines of at most width bytes.
func wrap(s string, width int) string {
	var lines []string
	line := ""
	for word := range strings.SplitSeq(s, " ") {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9@%_+=:,./-]+$`)

// quote quotes s for a POSIX shell, when it needs it.
func quote(s string) string {
	if plainArg.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}
