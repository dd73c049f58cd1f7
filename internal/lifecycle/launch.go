package lifecycle

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Two bee servers can run under one claude: the plugin's and a project's
// .mcp.json entry, which the README says happens in a checkout of bee. Each
// writes the run file for that claude on start, so the later one takes it
// over. A /mcp reconnect also starts a newer bridge, and may abandon the
// older one with its stdin open; that one must let go (DESIGN: it does not
// hold claims forever). The two cases differ in how the newer bridge was
// launched: a reconnect starts the same server entry again (same program,
// arguments, plugin root and BEE_* settings), a second entry does not.
//
// The rule: a bridge whose run file has been taken over ends only when the
// newer bridge was launched as it was. A bridge launched differently is a
// sibling: both serve their own clients, and the newest holds the run file,
// so /clear retires only its identity; the older one says so in its log.
// When the newer bridge's launch cannot be read (it is gone, or this is
// not Linux), the older one ends, as before: that is the reconnect case.

// A launch is how a process was started, as far as telling a reconnect of
// the same MCP server entry from another entry goes.
type launch struct {
	exe  string
	args []string
	env  []string // CLAUDE_PLUGIN_ROOT and every BEE_* variable, sorted
}

// launchOf reads process pid's launch from /proc.
func launchOf(pid int) (launch, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	exe, err := os.Readlink(dir + "/exe")
	if err != nil {
		return launch{}, fmt.Errorf("read the launch of pid %d: %w", pid, err)
	}
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return launch{}, fmt.Errorf("read the launch of pid %d: %w", pid, err)
	}
	environ, err := os.ReadFile(dir + "/environ")
	if err != nil {
		return launch{}, fmt.Errorf("read the launch of pid %d: %w", pid, err)
	}
	return launch{exe: exe, args: nulSplit(cmdline), env: serverEnv(nulSplit(environ))}, nil
}

// serverEnv keeps the variables that tell one server entry from another.
func serverEnv(env []string) []string {
	var keep []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "BEE_") || strings.HasPrefix(kv, "CLAUDE_PLUGIN_ROOT=") {
			keep = append(keep, kv)
		}
	}
	slices.Sort(keep)
	return keep
}

func nulSplit(b []byte) []string {
	var out []string
	for f := range bytes.SplitSeq(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
		out = append(out, string(f))
	}
	return out
}

func (l launch) equal(o launch) bool {
	return l.exe == o.exe && slices.Equal(l.args, o.args) && slices.Equal(l.env, o.env)
}

// differences names what differs between l and o: "program",
// "arguments" and the names of the variables, never their values (a
// board URL may hold a password).
func (l launch) differences(o launch) string {
	var d []string
	if l.exe != o.exe {
		d = append(d, "program")
	}
	if !slices.Equal(l.args, o.args) {
		d = append(d, "arguments")
	}
	names := map[string]bool{}
	for _, kv := range l.env {
		if !slices.Contains(o.env, kv) {
			names[strings.SplitN(kv, "=", 2)[0]] = true
		}
	}
	for _, kv := range o.env {
		if !slices.Contains(l.env, kv) {
			names[strings.SplitN(kv, "=", 2)[0]] = true
		}
	}
	d = append(d, slices.Sorted(maps.Keys(names))...)
	return strings.Join(d, ", ")
}

// errNoLaunch is returned by sibling when the launches cannot be compared.
var errNoLaunch = errors.New("cannot compare launches")

// sibling reports whether the bridge pid was launched differently from
// this process (another server entry under the same claude, not a
// reconnect of this one) and what differs.
func sibling(pid int) (bool, string, error) {
	self, err := launchOf(os.Getpid())
	if err != nil {
		return false, "", fmt.Errorf("%w: %w", errNoLaunch, err)
	}
	other, err := launchOf(pid)
	if err != nil {
		return false, "", fmt.Errorf("%w: %w", errNoLaunch, err)
	}
	return !self.equal(other), self.differences(other), nil
}
