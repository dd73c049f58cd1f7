// Package logkey names the slog attributes bee logs with, so that every
// package spells them the same way and a person can grep one key across the
// bridge, the hook and the board. It promises nothing else; in particular
// there is deliberately no key for the run file's token, which is never
// logged.
package logkey

const (
	Identity  = "identity"   // an agent identity, agent:<name>#<8 hex>
	Previous  = "previous"   // the identity a retire replaced
	Agent     = "agent"      // an agent name
	ClaudePID = "claude_pid" // the Claude Code process the bridge belongs to
	SessionID = "session_id" // a Claude Code session id
	ActionID  = "action_id"  // an action's id on the board
	ActionIDs = "action_ids" // several actions' ids
	Holder    = "holder"     // the identity holding an action
	To        = "to"         // whom an action is for: "", an agent name or an identity
	From      = "from"       // who posted an action
	State     = "state"      // an action's state
	Tool      = "tool"       // an MCP tool name
	Source    = "source"     // the action source (board, none)
	Path      = "path"       // a file bee reads or writes
	Port      = "port"       // the control channel's loopback port
	Signal    = "signal"     // the signal that ended the bridge
	Reason    = "reason"     // why something ended
	Elapsed   = "elapsed"    // how long something took
	Err       = "err"        // an error
	Subsystem = "subsystem"  // the part of bee (or a library) that logged
)
