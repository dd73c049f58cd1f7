// Package logkey names the slog attributes bee logs with, so that every
// package spells them the same way and a person can grep one key across the
// bridge, the hook and the board. It promises nothing else; in particular
// there is deliberately no key for the run file's token, which is never
// logged.
package logkey

const (
	Identity   = "identity"    // an agent identity, agent:<name>#<8 hex>
	Previous   = "previous"    // the identity a retire replaced
	Agent      = "agent"       // an agent name
	ClaudePID  = "claude_pid"  // the Claude Code process the bridge belongs to
	SessionID  = "session_id"  // a Claude Code session id
	ActionID   = "action_id"   // an action's id on the board
	ActionIDs  = "action_ids"  // several actions' ids
	Holder     = "holder"      // the identity holding an action
	To         = "to"          // whom an action is for: "", an agent name or an identity
	From       = "from"        // who posted an action
	State      = "state"       // an action's state
	Tool       = "tool"        // an MCP tool name
	Source     = "source"      // the action source (board, none)
	Path       = "path"        // a file bee reads or writes
	Port       = "port"        // the control channel's loopback port
	Signal     = "signal"      // the signal that ended the bridge
	Reason     = "reason"      // why something ended
	Elapsed    = "elapsed"     // how long something took
	Err        = "err"         // an error
	Subsystem  = "subsystem"   // the part of bee (or a library) that logged
	SchemaFrom = "schema_from" // a board's schema version before a migration
	SchemaTo   = "schema_to"   // the schema version it was migrated to

	Remote        = "remote"         // the caller's address on the control channel
	Panic         = "panic"          // what a handler panicked with
	Stack         = "stack"          // the goroutine's stack at that panic
	RequestID     = "id"             // a JSON-RPC request id
	Method        = "method"         // a JSON-RPC method
	Bytes         = "bytes"          // a size in bytes
	Limit         = "limit"          // the limit a size passed
	Prefix        = "prefix"         // the start of a line that could not be used
	ProgressToken = "progress_token" // a request's progress token
	Pending       = "pending"        // how many requests were still running
	WaiterPID     = "waiter_pid"     // a wake-on-work waiter's process
	HookEvent     = "hook_event"     // the hook event a waiter was armed for
	Kind          = "kind"           // what a wake is for (work, an outcome, a re-arm)
	Armed         = "armed"          // whether a waiter is armed
	Within        = "within"         // a bound something must happen within
	Comm          = "comm"           // a process's command name
	Rule          = "rule"           // how the claude process was found
	BridgePID     = "bridge_pid"     // another bridge's process
	Differs       = "differs"        // how two bridges' launches differ
	Superseded    = "superseded"     // the older waiter's process a newer waiter replaced
	IsError       = "is_error"       // whether a tool call's answer was a refusal
	Attempt       = "attempt"        // which try of something retried this is
	Pause         = "pause"          // how long until the next try
	Op            = "op"             // what was being done when something failed
	Template      = "template"       // an html/template's name
	Reservation   = "reservation"    // a reservation's id on the board (r-<n>)
	Repo          = "repo"           // a repository's name (package repo)
	Count         = "count"          // how many of something
)
