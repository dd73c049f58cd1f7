package ancestry

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPick(t *testing.T) {
	versioned := []Proc{{PID: 20, PPID: 10, Comm: "sh"}, {PID: 10, PPID: 9, Comm: "claude-2.1.328"}, {PID: 9, PPID: 1, Comm: "bash"}}
	bridgeChain := []Proc{{PID: 10, PPID: 9, Comm: "claude-2.1.328"}, {PID: 9, PPID: 1, Comm: "bash"}}
	for _, tc := range []struct {
		name  string
		chain []Proc
		hints Hints
		want  Found
	}{
		{name: "by name, hints ignored", chain: []Proc{{PID: 20, Comm: "sh"}, {PID: 10, Comm: "claude"}}, hints: Hints{ClaudePID: 20, ParentIsClaude: true},
			want: Found{PID: 10, Comm: "claude", Client: Claude, Rule: ByName}},
		{name: "nothing, no hints", chain: versioned},
		{name: "hook: CLAUDE_PID is an ancestor", chain: versioned, hints: Hints{ClaudePID: 10},
			want: Found{PID: 10, Comm: "claude-2.1.328", Client: Claude, Rule: ByClaudePID}},
		{name: "hook: CLAUDE_PID not an ancestor", chain: versioned, hints: Hints{ClaudePID: 4242}},
		{name: "bridge: parent with CLAUDECODE=1", chain: bridgeChain, hints: Hints{ParentIsClaude: true},
			want: Found{PID: 10, Comm: "claude-2.1.328", Client: Claude, Rule: ByParent}},
		{name: "bridge without CLAUDECODE", chain: bridgeChain},
		{name: "CLAUDE_PID before the parent", chain: versioned, hints: Hints{ClaudePID: 9, ParentIsClaude: true},
			want: Found{PID: 9, Comm: "bash", Client: Claude, Rule: ByClaudePID}},
		{name: "parent is init", chain: []Proc{{PID: 1, Comm: "systemd"}}, hints: Hints{ParentIsClaude: true}},
		{name: "empty chain", hints: Hints{ClaudePID: 10, ParentIsClaude: true}},
		{name: "codex by name, hints ignored", chain: []Proc{{PID: 20, Comm: "sh"}, {PID: 10, Comm: "codex"}}, hints: Hints{ParentIsClaude: true},
			want: Found{PID: 10, Comm: "codex", Client: Codex, Rule: ByName}},
		{name: "gemini's node by name", chain: []Proc{{PID: 20, Comm: "node", Args: []string{"node", "/x/.bin/gemini"}}, {PID: 10, Comm: "node", Args: []string{"node", "/x/.bin/gemini"}}},
			want: Found{PID: 20, Comm: "node", Client: Gemini, Rule: ByName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Pick(tc.chain, tc.hints)
			require.Equal(t, tc.want.PID != 0, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestHints(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	require.Equal(t, Hints{ClaudePID: 4242}, HookHints(env(map[string]string{"CLAUDE_PID": "4242", "CLAUDECODE": "1"})), "a hook never takes its parent")
	require.Equal(t, Hints{}, HookHints(env(map[string]string{"CLAUDE_PID": "x"})))
	require.Equal(t, Hints{}, HookHints(env(map[string]string{"CLAUDE_PID": "-3"})))
	require.Equal(t, Hints{ParentIsClaude: true}, BridgeHints(env(map[string]string{"CLAUDECODE": "1", "CLAUDE_PID": "4242"})))
	require.Equal(t, Hints{}, BridgeHints(env(map[string]string{"CLAUDECODE": "0"})))
}
