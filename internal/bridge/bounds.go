package bridge

import (
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tractat-us/bee/internal/clients"
)

// WaitBounds are the bounds of the tools that wait (bee_wait_action,
// bee_await_action): timeoutSeconds is a whole number of seconds from 1 to
// Max, and Default when the call gives none.
type WaitBounds struct {
	Default time.Duration
	Max     time.Duration
}

// DefaultWaitBounds are the design's: long enough that an idle agent is
// cheap, short enough that a cancel or /clear lands within a minute.
var DefaultWaitBounds = WaitBounds{Default: 45 * time.Second, Max: 60 * time.Second}

// boundsFor returns the wait bounds of one call. It is the one place they
// are decided: the argument check, a call's deadline and the refusal's
// words all ask it. They are DefaultWaitBounds cut to what the client the
// handshake names allows (clients.Client.Cap): under Codex CLI at most
// 50 s, below its tool-call timeout. The input schema says
// DefaultWaitBounds; the descriptions in tools/list add the client's
// bound (clients.Middleware).
func boundsFor(req *mcp.CallToolRequest) WaitBounds {
	c := clients.FromRequest(req)
	return WaitBounds{Default: c.Cap(DefaultWaitBounds.Default), Max: c.Cap(DefaultWaitBounds.Max)}
}

// seconds returns b's bounds in whole seconds.
func (b WaitBounds) seconds() (def, max int) {
	return int(b.Default / time.Second), int(b.Max / time.Second)
}

const (
	// DefaultProgressInterval is how often a waiting call reports progress
	// when it carries a progress token. Progress resets the client's idle
	// timer (Claude Code's CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT), and a call
	// the client gives up on for idleness is abandoned without a cancel:
	// at 2 s, only an idle timeout under about 2 s can abandon a wait, for
	// 22 notifications over a 45 s wait.
	DefaultProgressInterval = 2 * time.Second
	// progressQuiet is the stretch before a wait's bound in which no
	// progress is sent, so that none races the result (Claude Code logs a
	// dropped connection for a progress notification that arrives with or
	// after it).
	progressQuiet = 500 * time.Millisecond
	// setupBound is how long a tool call that does not wait may wait for
	// the session to be set up (the board opened) before it says so.
	setupBound = 10 * time.Second
)
