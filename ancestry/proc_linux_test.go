package ancestry

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       Proc
		wantErr    bool
	}{
		{name: "plain", stat: "42 (claude) S 7 42 42 0 -1", want: Proc{PID: 42, PPID: 7, Comm: "claude"}},
		{name: "spaces", stat: "42 (claude code) S 7 42", want: Proc{PID: 42, PPID: 7, Comm: "claude code"}},
		{name: "parentheses", stat: "42 (a) S 9 (b)) R 7 42", want: Proc{PID: 42, PPID: 7, Comm: "a) S 9 (b)"}},
		{name: "empty comm", stat: "42 () S 1 1", want: Proc{PID: 42, PPID: 1, Comm: ""}},
		{name: "no comm", stat: "42 claude S 7", wantErr: true},
		{name: "truncated", stat: "42 (claude) S", wantErr: true},
		{name: "bad parent", stat: "42 (claude) S x 1", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat(42, tc.stat)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestProcOf_Self holds procOf to what the process knows of itself.
func TestProcOf_Self(t *testing.T) {
	p, err := procOf(context.Background(), os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), p.PPID)
	comm, err := os.ReadFile("/proc/self/comm")
	require.NoError(t, err)
	require.Equal(t, string(comm[:len(comm)-1]), p.Comm)
}

func TestProcOf_GoneIsGone(t *testing.T) {
	_, err := procOf(context.Background(), 1<<30) // above pid_max
	require.True(t, isGone(err), "err = %v", err)
}

// chainUntil ends the walk at the first ancestor stop accepts, and Chain
// walks on past it.
func TestChainUntil_Stops(t *testing.T) {
	ctx := context.Background()
	full, err := Chain(ctx, os.Getpid())
	require.NoError(t, err)
	require.NotEmpty(t, full)
	first, err := chainUntil(ctx, os.Getpid(), func(Proc) bool { return true })
	require.NoError(t, err)
	require.Equal(t, full[:1], first)
	parent := full[0].PID
	upTo, err := chainUntil(ctx, os.Getpid(), func(p Proc) bool { return p.PID == parent })
	require.NoError(t, err)
	require.Equal(t, full[:1], upTo)
}

func TestParseCmdline(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{name: "empty (a zombie, a kernel thread)", in: "", want: nil},
		{name: "one", in: "node\x00", want: []string{"node"}},
		{name: "several", in: "/usr/bin/node\x00--max-old-space-size=12052\x00/x/.bin/gemini\x00", want: []string{"/usr/bin/node", "--max-old-space-size=12052", "/x/.bin/gemini"}},
		{name: "an empty argument", in: "node\x00\x00x\x00", want: []string{"node", "", "x"}},
		{name: "no trailing NUL (a rewritten title)", in: "node script", want: []string{"node script"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseCmdline([]byte(tc.in)))
		})
	}
}
