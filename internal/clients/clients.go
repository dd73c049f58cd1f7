// Package clients knows the MCP clients bee's bridge serves, Claude Code,
// Codex CLI and Gemini CLI, from the name each gives itself in the MCP
// handshake: how long each lets a tool call run, how long a bee wait may
// therefore last under it, and whether bee can wake an idle session of it.
// Everything it says was measured against the client version named in
// docs/other-clients.md; a client it does not know is served as Claude
// Code is, bee's first client.
//
// The bridge asks it for the bounds of a wait ([Client.Cap]), for what
// the model is told about waiting and hearing of outcomes (the notes
// [Middleware] adds to the handshake's instructions and to the
// descriptions of the tools that wait and post, per connection, so that
// the bridge registers its tools once; the next steps of empty answers
// under a client bee cannot wake), and for who is calling
// ([Client.String], for bee_whoami).
package clients

import (
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/ancestry"
)

// A Client is the MCP client on the other end of a bridge's connection.
type Client struct {
	// Kind is which client it is; "" when the name is not one bee knows.
	Kind ancestry.Client
	// Name and Version are what the client said in the handshake.
	Name, Version string
	// ToolTimeout is the client's default limit on one MCP tool call, as
	// measured; 0 when there is none worth counting (longer than a day).
	ToolTimeout time.Duration
	// WaitCap is the longest wait bee serves this client (the bridge's
	// Max for timeoutSeconds, and its Default when that is longer). 0
	// means bee's own longest wait.
	WaitCap time.Duration
	// Wakes is whether bee can wake an idle session of this client when
	// work arrives (Claude Code's asyncRewake waiter). Without it an idle
	// session hears of work only when someone types, or by waiting again.
	Wakes bool
}

// CodexWaitCap is the longest wait bee serves Codex CLI. Codex's tool-call
// limit (tool_timeout_sec) is 300 s by default in 0.171.0, but it was 60 s
// in earlier releases and is what its documentation and many setups still
// say; a wait well below 60 s outlives neither, and costs a session that
// keeps waiting one model request per 50 s instead of per 60 s.
const CodexWaitCap = 50 * time.Second

// FromImplementation names the client from the name and version it gave
// in the MCP handshake (clientInfo): claude-code (Claude Code 2.1.328),
// codex-mcp-client (Codex CLI 0.171.0), gemini-cli-mcp-client (Gemini CLI
// 0.61.0), or names that start like them.
func FromImplementation(name, version string) Client {
	c := Client{Name: name, Version: version}
	switch n := strings.ToLower(name); {
	case strings.HasPrefix(n, "claude-code"):
		c.Kind = ancestry.Claude
		c.Wakes = true
	case strings.HasPrefix(n, "codex"):
		c.Kind = ancestry.Codex
		c.ToolTimeout = 300 * time.Second
		c.WaitCap = CodexWaitCap
	case strings.HasPrefix(n, "gemini-cli"):
		c.Kind = ancestry.Gemini
		c.ToolTimeout = 600 * time.Second
	default:
		// Served as Claude Code was before bee knew other clients.
		c.Wakes = true
	}
	return c
}

// A clientInfoer is a request that knows its client: every server request
// of the go-sdk, from the per-request _meta (MCP 2026-07-28) or else the
// connection's initialize.
type clientInfoer interface {
	ClientInfo() *mcp.Implementation
}

// FromRequest names the client that sent req; an unknown one when req
// says nothing.
func FromRequest(req mcp.Request) Client {
	if r, ok := req.(clientInfoer); ok {
		if impl := r.ClientInfo(); impl != nil {
			return FromImplementation(impl.Name, impl.Version)
		}
	}
	return FromImplementation("", "")
}

// Cap bounds a wait of d for this client: d itself, or WaitCap when d is
// longer.
func (c Client) Cap(d time.Duration) time.Duration {
	if c.WaitCap > 0 && d > c.WaitCap {
		return c.WaitCap
	}
	return d
}

// Title is the client's name as people know it ("Codex CLI"), or the name
// it gave when bee does not know it.
func (c Client) Title() string {
	if t := c.Kind.Title(); t != "" {
		return t
	}
	return c.Name
}

// String is the client and its version, "Codex CLI 0.171.0", or "" when
// the handshake named none.
func (c Client) String() string {
	t := c.Title()
	if t == "" || c.Version == "" {
		return t
	}
	return t + " " + c.Version
}

// capNote says how long a wait may last under this client, or "".
func (c Client) capNote() string {
	if c.WaitCap <= 0 {
		return ""
	}
	return fmt.Sprintf("Under %s a wait lasts at most %d s (timeoutSeconds 1 to %d), below its tool-call timeout. ",
		c.Title(), int(c.WaitCap/time.Second), int(c.WaitCap/time.Second))
}

// WaitNote ends bee_wait_action's description: how long a wait may last
// under this client, and what to do when it ends empty.
func (c Client) WaitNote() string {
	if c.Wakes {
		return c.capNote() + "On an empty result, end your turn instead of calling again: bee wakes this session when an action arrives, " +
			"and you call bee_wait_action then."
	}
	return c.capNote() + fmt.Sprintf("bee cannot wake a %s session: nothing starts a turn when work arrives. "+
		"On an empty result, end your turn and say that no work is waiting, unless you were asked to keep taking work: "+
		"then call bee_wait_action again at its full length (each call is one model request), never in a faster loop.", c.Title())
}

// AwaitNote ends bee_await_action's description: how long it may wait
// under this client, and how its poster hears of an outcome.
func (c Client) AwaitNote() string {
	if c.Wakes {
		return c.capNote() + "If you have nothing else to do, you may end your turn instead: bee wakes you when an action you posted ends."
	}
	return c.capNote() + fmt.Sprintf("bee cannot wake a %s session when an action you posted ends: "+
		"to hear of it, call bee_await_action again after an empty result (each call is one model request) until it returns the outcome.", c.Title())
}

// PostNote ends bee_post_action's description: how its poster hears how
// the action ended.
func (c Client) PostNote() string {
	if c.Wakes {
		return "Then end your turn or go on with other work: bee wakes you when it ends, or bee_await_action waits for it."
	}
	return fmt.Sprintf("bee cannot wake a %s session when it ends: bee_await_action waits for its outcome.", c.Title())
}

// Instructions is the server's instructions for this client: base, which
// says nothing about idle sessions, then what an idle session means here.
func (c Client) Instructions(base string) string {
	var note string
	if c.Wakes {
		note = "When bee_wait_action returns no records, there is no work: end your turn. Do not call it again in a loop. " +
			"bee wakes this session with a message when an action arrives for you (then call bee_wait_action to take it) " +
			"or when an action you posted ends, so after posting you may end your turn too."
	} else {
		note = fmt.Sprintf("bee cannot wake this %s session: nothing starts a turn when work arrives or an action you posted ends. "+
			"When bee_wait_action returns no records, end your turn and say that no work is waiting, unless you were asked to keep taking work: "+
			"then call it again at its full length (each call is one model request), never in a faster loop. "+
			"After posting work, bee_await_action is how you hear its outcome.", c.Title())
	}
	if cn := c.capNote(); cn != "" {
		note += " " + strings.TrimSpace(cn)
	}
	return strings.TrimRight(base, "\n") + "\n" + note
}

// The next steps of answers under a client bee cannot wake; under one it
// can, the bridge's own words hold.

// EmptyWaitNext is what to do after a wait that found nothing.
func (c Client) EmptyWaitNext() string {
	return fmt.Sprintf("There is no work for you now. bee cannot wake this %s session: end your turn and say that no work is waiting; "+
		"only if you were asked to keep taking work, call bee_wait_action again at its full length (each call is one model request).", c.Title())
}

// EmptyAwaitNext is what to do after an await in which none of the actions
// ended within secs seconds.
func (c Client) EmptyAwaitNext(secs int) string {
	return fmt.Sprintf("None of them ended within %d s. Call bee_await_action again to hear of them: bee cannot wake this %s session when one ends.", secs, c.Title())
}

// PostedNext is what to do after posting action id.
func (c Client) PostedNext(id string) string {
	return fmt.Sprintf("Posted as %s. Go on with other work; bee cannot wake this %s session when it ends: bee_await_action waits for it, bee_cancel_action calls it off.", id, c.Title())
}
