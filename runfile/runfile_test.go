package runfile

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func testEntry(t *testing.T, port int) Entry {
	t.Helper()
	tok, err := NewToken()
	require.NoError(t, err)
	return Entry{Port: port, Token: tok, PID: os.Getpid()}
}

// dirNames lists every name in dir, temp files included.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Mode()
}

func TestDir(t *testing.T) {
	given := t.TempDir()
	got, err := Dir(given)
	require.NoError(t, err)
	require.Equal(t, given, got, "a given directory is used as it is")
	env := t.TempDir()
	t.Setenv(EnvDir, env)
	got, err = Dir("")
	require.NoError(t, err)
	require.Equal(t, env, got, `"" means the default run directory`)
}

func TestDefaultDir(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv(EnvDir, dir)
		got, err := DefaultDir()
		require.NoError(t, err)
		require.Equal(t, dir, got)
	})
	t.Run("relative env is made absolute", func(t *testing.T) {
		t.Setenv(EnvDir, "rel/run")
		got, err := DefaultDir()
		require.NoError(t, err)
		require.True(t, filepath.IsAbs(got), got)
		require.True(t, strings.HasSuffix(got, filepath.Join("rel", "run")), got)
	})
	t.Run("home", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv(EnvDir, "")
		t.Setenv("HOME", home)
		got, err := DefaultDir()
		require.NoError(t, err)
		require.Equal(t, filepath.Join(home, ".bee", "run"), got)
	})
}

func TestEnsureDir(t *testing.T) {
	t.Parallel()
	t.Run("creates 0700 with parents", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "run")
		require.NoError(t, EnsureDir(dir))
		require.Equal(t, fs.ModeDir|0o700, mode(t, dir))
	})
	t.Run("forces an existing 0755 to 0700", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.Chmod(dir, 0o755)) // past the umask
		require.NoError(t, EnsureDir(dir))
		require.Equal(t, fs.ModeDir|0o700, mode(t, dir))
	})
	t.Run("clears setgid and sticky", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chmod(dir, 0o700|fs.ModeSetgid|fs.ModeSticky))
		require.NoError(t, EnsureDir(dir))
		require.Equal(t, fs.ModeDir|0o700, mode(t, dir))
	})
	t.Run("refuses a symlink", func(t *testing.T) {
		target := t.TempDir()
		require.NoError(t, os.Chmod(target, 0o755))
		link := filepath.Join(t.TempDir(), "run")
		require.NoError(t, os.Symlink(target, link))
		for _, dir := range []string{link, link + "/"} {
			err := EnsureDir(dir)
			require.ErrorIs(t, err, ErrUnsafeDir)
			var de *DirError
			require.ErrorAs(t, err, &de)
			require.Equal(t, link, de.Dir)
			require.Contains(t, err.Error(), "is a symlink; remove it or set BEE_RUN_DIR")
		}
		require.Equal(t, fs.ModeDir|0o755, mode(t, target), "the symlink's target is left alone")
	})
	t.Run("refuses a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "run")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		err := EnsureDir(path)
		require.ErrorIs(t, err, ErrUnsafeDir)
		require.Contains(t, err.Error(), "is not a directory")
	})
	t.Run("refuses another user's directory", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to chown a directory to another user")
		}
		dir := filepath.Join(t.TempDir(), "run")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.Chown(dir, 65534, 65534))
		err := EnsureDir(dir)
		require.ErrorIs(t, err, ErrUnsafeDir)
		require.Contains(t, err.Error(), "belongs to uid 65534, not to you (uid 0); set BEE_RUN_DIR")
		require.Equal(t, fs.ModeDir|0o755, mode(t, dir), "a refused directory is not touched")
	})
	t.Run("refuses empty", func(t *testing.T) {
		require.ErrorIs(t, EnsureDir(""), ErrUnsafeDir)
	})
}

func TestNewToken(t *testing.T) {
	t.Parallel()
	a, err := NewToken()
	require.NoError(t, err)
	b, err := NewToken()
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{64}$`, a)
	require.NotEqual(t, a, b)
}

func TestPath(t *testing.T) {
	t.Parallel()
	require.Equal(t, filepath.Join("/run/bee", "4242.json"), Path("/run/bee", 4242))
}

func TestWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	e := testEntry(t, 4100)
	require.NoError(t, Write(dir, 77, e))
	require.Equal(t, fs.ModeDir|0o700, mode(t, dir))
	require.Equal(t, fs.FileMode(0o600), mode(t, Path(dir, 77)))
	require.Equal(t, []string{"77.json"}, dirNames(t, dir), "no temp file is left")

	raw, err := os.ReadFile(Path(dir, 77))
	require.NoError(t, err)
	var onDisk map[string]any
	require.NoError(t, json.Unmarshal(raw, &onDisk))
	require.Equal(t, map[string]any{"port": 4100.0, "token": e.Token, "pid": float64(e.PID)}, onDisk)

	got, err := Read(dir, 77)
	require.NoError(t, err)
	require.Equal(t, e, got)

	e2 := testEntry(t, 4200)
	require.NoError(t, Write(dir, 77, e2), "a write replaces the file")
	got, err = Read(dir, 77)
	require.NoError(t, err)
	require.Equal(t, e2, got)
}

func TestWrite_Refuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := testEntry(t, 4100)
	for _, tc := range []struct {
		name      string
		claudePID int
		e         Entry
		want      string
	}{
		{name: "claude pid 0", claudePID: 0, e: good, want: "claude pid 0"},
		{name: "port 0", claudePID: 1, e: Entry{Port: 0, Token: "t", PID: 1}, want: "port 0"},
		{name: "port 65536", claudePID: 1, e: Entry{Port: 65536, Token: "t", PID: 1}, want: "port 65536"},
		{name: "empty token", claudePID: 1, e: Entry{Port: 1, PID: 1}, want: "empty token"},
		{name: "bridge pid 0", claudePID: 1, e: Entry{Port: 1, Token: "t"}, want: "bridge pid 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(dir, tc.claudePID, tc.e)
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, dirNames(t, dir))
		})
	}
}

func TestWrite_UnsafeDir(t *testing.T) {
	t.Parallel()
	link := filepath.Join(t.TempDir(), "run")
	target := t.TempDir()
	require.NoError(t, os.Symlink(target, link))
	require.ErrorIs(t, Write(link, 1, testEntry(t, 1)), ErrUnsafeDir)
	require.Empty(t, dirNames(t, target))
}

// TestWrite_FailureLeavesNoTemp makes the final rename fail (a directory
// sits where the run file goes) and checks the temp file is gone.
func TestWrite_FailureLeavesNoTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(Path(dir, 5), 0o700))
	err := Write(dir, 5, testEntry(t, 4100))
	var fe *FileError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, Path(dir, 5), fe.Path)
	require.Equal(t, []string{"5.json"}, dirNames(t, dir))
}

// TestWrite_ConcurrentReader rewrites one run file many times while another
// goroutine reads it in a loop: every read must see one whole entry.
func TestWrite_ConcurrentReader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	entries := []Entry{testEntry(t, 4100), testEntry(t, 4200)}
	// Different lengths, so a torn read could not pass for either.
	entries[1].Token += strings.Repeat("x", 500)
	require.NoError(t, Write(dir, 9, entries[0]))

	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads int
	var readErr error
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			got, err := Read(dir, 9)
			reads++
			if err != nil {
				readErr = err
				return
			}
			if got != entries[0] && got != entries[1] {
				readErr = errors.New("read an entry that was never written: " + got.String())
				return
			}
		}
	})
	for i := range 100 {
		require.NoError(t, Write(dir, 9, entries[i%2]))
	}
	close(done)
	wg.Wait()
	require.NoError(t, readErr)
	require.Positive(t, reads)
	require.Equal(t, []string{"9.json"}, dirNames(t, dir))
}

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t.Run("missing", func(t *testing.T) {
		_, err := Read(dir, 123)
		require.ErrorIs(t, err, fs.ErrNotExist)
		var fe *FileError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, Path(dir, 123), fe.Path)
		require.Equal(t, "run file "+Path(dir, 123)+": read: no such file or directory", err.Error())
	})
	for _, tc := range []struct {
		name    string
		content string
	}{
		{name: "garbage", content: "not json at all"},
		{name: "empty", content: ""},
		{name: "array", content: `[1,2]`},
		{name: "unknown field", content: `{"port":1,"token":"t","pid":1,"extra":true}`},
		{name: "port as string", content: `{"port":"1","token":"t","pid":1}`},
		{name: "port 0", content: `{"port":0,"token":"t","pid":1}`},
		{name: "no token", content: `{"port":1,"pid":1}`},
		{name: "no pid", content: `{"port":1,"token":"t"}`},
		{name: "two objects", content: `{"port":1,"token":"t","pid":1}{}`},
		{name: "too big", content: `{"port":1,"token":"` + strings.Repeat("t", 5000) + `","pid":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(Path(dir, 1), []byte(tc.content), 0o600))
			_, err := Read(dir, 1)
			require.ErrorIs(t, err, ErrMalformed)
			require.ErrorContains(t, err, Path(dir, 1))
			require.NotContains(t, err.Error(), strings.Repeat("t", 100), "the content is not echoed")
		})
	}
	t.Run("symlink", func(t *testing.T) {
		d := t.TempDir()
		real := filepath.Join(t.TempDir(), "x.json")
		require.NoError(t, os.WriteFile(real, []byte(`{"port":1,"token":"t","pid":1}`), 0o600))
		require.NoError(t, os.Symlink(real, Path(d, 2)))
		_, err := Read(d, 2)
		require.ErrorIs(t, err, ErrMalformed)
	})
	t.Run("fifo does not block", func(t *testing.T) {
		d := t.TempDir()
		require.NoError(t, syscall.Mkfifo(Path(d, 3), 0o600))
		_, err := Read(d, 3)
		require.ErrorIs(t, err, ErrMalformed)
	})
}

func TestEntry_String(t *testing.T) {
	t.Parallel()
	e := testEntry(t, 4100)
	require.NotContains(t, e.String(), e.Token)
	require.Contains(t, e.String(), "4100")
}

func TestRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mine, theirs := testEntry(t, 4100), testEntry(t, 4200)

	t.Run("missing", func(t *testing.T) {
		removed, err := Remove(dir, 1, mine.Token)
		require.NoError(t, err)
		require.False(t, removed)
	})
	t.Run("own token, then idempotent", func(t *testing.T) {
		require.NoError(t, Write(dir, 1, mine))
		removed, err := Remove(dir, 1, mine.Token)
		require.NoError(t, err)
		require.True(t, removed)
		_, err = Read(dir, 1)
		require.ErrorIs(t, err, fs.ErrNotExist)
		removed, err = Remove(dir, 1, mine.Token)
		require.NoError(t, err)
		require.False(t, removed)
		require.Empty(t, dirNames(t, dir))
	})
	t.Run("a replacement bridge's file survives", func(t *testing.T) {
		require.NoError(t, Write(dir, 2, theirs))
		removed, err := Remove(dir, 2, mine.Token)
		require.NoError(t, err)
		require.False(t, removed)
		got, err := Read(dir, 2)
		require.NoError(t, err)
		require.Equal(t, theirs, got)
		require.Equal(t, []string{"2.json"}, dirNames(t, dir))
	})
	t.Run("token prefix is not enough", func(t *testing.T) {
		require.NoError(t, Write(dir, 3, theirs))
		removed, err := Remove(dir, 3, theirs.Token[:10])
		require.NoError(t, err)
		require.False(t, removed)
	})
	t.Run("empty token", func(t *testing.T) {
		_, err := Remove(dir, 3, "")
		require.Error(t, err)
	})
	t.Run("malformed is left and reported", func(t *testing.T) {
		require.NoError(t, os.WriteFile(Path(dir, 4), []byte("junk"), 0o600))
		removed, err := Remove(dir, 4, mine.Token)
		require.ErrorIs(t, err, ErrMalformed)
		require.False(t, removed)
		require.FileExists(t, Path(dir, 4))
	})
}

// TestRemove_ReplacedAfterCheck writes a replacement bridge's file right
// after Remove has checked the old one's token: it must survive.
// It is not parallel: it sets testHookRemoveChecked, which every Remove
// runs, and parallel tests run only once the sequential ones are done.
func TestRemove_ReplacedAfterCheck(t *testing.T) {
	dir := t.TempDir()
	old, repl := testEntry(t, 4100), testEntry(t, 4200)
	require.NoError(t, Write(dir, 8, old))
	testHookRemoveChecked = func() { require.NoError(t, Write(dir, 8, repl)) }
	t.Cleanup(func() { testHookRemoveChecked = nil })

	removed, err := Remove(dir, 8, old.Token)
	require.NoError(t, err)
	require.False(t, removed)
	got, err := Read(dir, 8)
	require.NoError(t, err)
	require.Equal(t, repl, got)
	require.Equal(t, []string{"8.json"}, dirNames(t, dir), "nothing is left aside")
}

// TestRemove_RacingWrite has one bridge remove its file while its
// replacement writes a new one: the replacement's file must always survive.
func TestRemove_RacingWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for range 50 {
		old, repl := testEntry(t, 4100), testEntry(t, 4200)
		require.NoError(t, Write(dir, 8, old))
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = Remove(dir, 8, old.Token) })
		require.NoError(t, Write(dir, 8, repl))
		wg.Wait()
		got, err := Read(dir, 8)
		require.NoError(t, err)
		require.Equal(t, repl, got)
	}
	require.Equal(t, []string{"8.json"}, dirNames(t, dir), "nothing is left aside")
}

func TestList(t *testing.T) {
	t.Parallel()
	t.Run("missing dir", func(t *testing.T) {
		got, err := List(filepath.Join(t.TempDir(), "nope"))
		require.NoError(t, err)
		require.Empty(t, got)
	})
	dir := t.TempDir()
	a, b := testEntry(t, 4100), testEntry(t, 4200)
	require.NoError(t, Write(dir, 300, a))
	require.NoError(t, Write(dir, 20, b))
	require.NoError(t, os.WriteFile(Path(dir, 1000), []byte("junk"), 0o600))
	for _, other := range []string{"x.json", "0.json", "-1.json", "007.json", "12.json.tmp", ".12.json.tmp-1", "notes"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, other), nil, 0o600))
	}
	got, err := List(dir)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, Listed{ClaudePID: 20, Path: Path(dir, 20), Entry: b}, got[0])
	require.Equal(t, Listed{ClaudePID: 300, Path: Path(dir, 300), Entry: a}, got[1])
	require.Equal(t, 1000, got[2].ClaudePID)
	require.ErrorIs(t, got[2].Err, ErrMalformed)
}

// Read trusts a run file only in a private directory of the caller's own:
// a file planted in a directory others can write to could send the token
// to any port.
func TestRead_RefusesUnsafeDir(t *testing.T) {
	t.Parallel()
	entry := Entry{Port: 4242, Token: strings.Repeat("ab", 32), PID: 99}
	t.Run("symlink", func(t *testing.T) {
		real := filepath.Join(t.TempDir(), "real")
		require.NoError(t, Write(real, 7, entry))
		link := filepath.Join(t.TempDir(), "run")
		require.NoError(t, os.Symlink(real, link))
		_, err := Read(link, 7)
		require.ErrorIs(t, err, ErrUnsafeDir)
		require.Contains(t, err.Error(), "is a symlink")
	})
	t.Run("writable by others", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		require.NoError(t, Write(dir, 7, entry))
		require.NoError(t, os.Chmod(dir, 0o777))
		_, err := Read(dir, 7)
		require.ErrorIs(t, err, ErrUnsafeDir)
		require.Contains(t, err.Error(), "can be written by others (mode 0777)")
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to chown a directory to another user")
		}
		dir := filepath.Join(t.TempDir(), "run")
		require.NoError(t, Write(dir, 7, entry))
		require.NoError(t, os.Chown(dir, 65534, 65534))
		_, err := Read(dir, 7)
		require.ErrorIs(t, err, ErrUnsafeDir)
		require.Contains(t, err.Error(), "belongs to uid 65534")
	})
	t.Run("missing", func(t *testing.T) {
		_, err := Read(filepath.Join(t.TempDir(), "none"), 7)
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("private", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		require.NoError(t, Write(dir, 7, entry))
		got, err := Read(dir, 7)
		require.NoError(t, err)
		require.Equal(t, entry, got)
	})
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// A SIGKILLed bridge's run file is swept: the bridge is dead, or the
// Claude process it served is. Files of live bridges, and files Sweep cannot
// read, stay.
func TestSweep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	me, dead := os.Getpid(), deadPID(t)
	live := testEntry(t, 4100)
	deadBridge := testEntry(t, 4200)
	deadBridge.PID = dead
	orphan := testEntry(t, 4300) // its bridge lives on, its claude is gone
	require.NoError(t, Write(dir, me, live))
	require.NoError(t, Write(dir, me+1, deadBridge))
	require.NoError(t, Write(dir, dead, orphan))
	require.NoError(t, os.WriteFile(Path(dir, 5), []byte("junk"), 0o600))
	alive := func(pid int) bool { return pid != dead && pid != me+1 }

	removed, err := Sweep(dir, alive)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{Path(dir, me+1), Path(dir, dead)}, removed)
	require.ElementsMatch(t, []string{strconv.Itoa(me) + ".json", "5.json"}, dirNames(t, dir))
	got, err := Read(dir, me)
	require.NoError(t, err)
	require.Equal(t, live, got)

	removed, err = Sweep(dir, alive)
	require.NoError(t, err)
	require.Empty(t, removed, "a second sweep finds nothing")
	removed, err = Sweep(filepath.Join(dir, "missing"), alive)
	require.NoError(t, err)
	require.Empty(t, removed)
}

// Sweep with the real liveness check: a reaped child's pid is dead.
func TestSweep_RealProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale := testEntry(t, 4200)
	stale.PID = deadPID(t)
	require.NoError(t, Write(dir, os.Getpid(), stale))
	removed, err := Sweep(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []string{Path(dir, os.Getpid())}, removed)
	require.Empty(t, dirNames(t, dir))
}

// A live bridge that replaces a dead one's file while Sweep looks at it
// keeps its file: Sweep removes only what it read.
func TestSweep_KeepsAReplacement(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale, repl := testEntry(t, 4200), testEntry(t, 4300)
	stale.PID = 999_999_999
	require.NoError(t, Write(dir, 8, stale))
	alive := func(pid int) bool {
		if pid == stale.PID {
			// The replacement bridge starts right after Sweep read the file.
			require.NoError(t, Write(dir, 8, repl))
			return false
		}
		return true
	}
	removed, err := Sweep(dir, alive)
	require.NoError(t, err)
	require.Empty(t, removed)
	got, err := Read(dir, 8)
	require.NoError(t, err)
	require.Equal(t, repl, got)
}
