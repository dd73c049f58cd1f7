package board

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// FuzzLockRecord reads arbitrary lock-file content as the record: it never
// panics, and a slot bee writes reads back whatever garbage surrounds it.
func FuzzLockRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("holder 12 1700000000000\n"))
	f.Add([]byte(strings.Repeat(" ", 63) + "\n" + "db 65024 99\n"))
	f.Add([]byte(fmt.Sprintf("%-63s\n%-63s\n%-63s\n", "holder 1 2", "db 3 4", "damaged 3 4 5 6")))
	f.Add([]byte(fmt.Sprintf("%-63s\n%-63s\n%-63s\n", "holder -1 2", "db x 4", "damaged 3 4 5")))
	f.Add([]byte("\x00\xff holder 99999999999999999999999 1"))
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "board.db-lock")
		require.NoError(t, os.WriteFile(path, content, 0o600))
		l, err := openWriteLock(path, false)
		require.NoError(t, err)
		defer l.close()
		r := l.record()
		require.GreaterOrEqual(t, r.holderPID, 0)

		id := fileID{65024, 4242}
		l.noteDB(id)
		l.noteHolder()
		r2 := l.record()
		require.Equal(t, id, r2.db)
		require.Equal(t, os.Getpid(), r2.holderPID)
		require.Equal(t, r.damaged, r2.damaged, "the damaged slot is left as it was")
		l.bind(id)
		require.NoError(t, l.damaged())
		l.noteDamaged(id)
		l.damageCheck = time.Time{} // read the mark now
		require.ErrorIs(t, l.damaged(), ErrCorrupt)
	})
}

// FuzzParseProcLocks reads arbitrary text as /proc/locks: it never panics,
// and the lines the kernel writes parse back to what they say.
func FuzzParseProcLocks(f *testing.F) {
	f.Add("1: POSIX  ADVISORY  WRITE 23408 fe:00:9978289 0 EOF\n", 23408, uint32(0xfe), uint32(0), uint64(9978289), int64(120), int64(120))
	f.Add("2: -> FLOCK  ADVISORY  WRITE 7 08:01:12 0 EOF\n3: OFDLCK ADVISORY  READ  -1 00:1b:5 128 128\n", 7, uint32(0x103), uint32(0x45), uint64(1), int64(0), int64(-1))
	f.Add("garbage\n1: POSIX\n1: POSIX ADVISORY WRITE x y z w\n", 1, uint32(0), uint32(0), uint64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, raw string, pid int, major, minor uint32, ino uint64, start, end int64) {
		_ = parseProcLocks([]byte(raw))

		major &= 0xfff // what the kernel's dev_t holds
		minor &= 0xfffff
		if pid < -1 || start < 0 || end < -1 {
			return
		}
		endText := "EOF"
		if end >= 0 {
			endText = fmt.Sprint(end)
		}
		line := fmt.Sprintf("%s1: POSIX  ADVISORY  WRITE %d %02x:%02x:%d %d %s\n", raw+"\n", pid, major, minor, ino, start, endText)
		locks := parseProcLocks([]byte(line))
		require.NotEmpty(t, locks)
		got := locks[len(locks)-1]
		want := procLock{kind: "POSIX", write: true, pid: pid, file: fileID{unix.Mkdev(major, minor), ino}, start: start, end: end}
		require.Equal(t, want, got)
	})
}

// A small board, made once: the file FuzzOpen_DamagedFile damages.
var fuzzBoard = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "bee-fuzz-board")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "board.db")
	b, err := Open(path, nil)
	if err != nil {
		return nil, err
	}
	ctx := b.ctx
	for i := range 40 {
		if _, err := b.Post(ctx, "user:fuzz", actions.Draft{Title: fmt.Sprintf("job %d", i), Body: strings.Repeat("body ", 40)}); err != nil {
			return nil, err
		}
	}
	who, err := identity.Mint("fuzz")
	if err != nil {
		return nil, err
	}
	if _, err := b.Next(ctx, who, "", time.Second); err != nil {
		return nil, err
	}
	if err := b.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// FuzzOpen_DamagedFile writes bytes over a real board file, or cuts it,
// and uses it: bee never panics and never reports a raw error; whatever it
// refuses, it refuses as a file that is not a usable board (or one from a
// newer bee).
func FuzzOpen_DamagedFile(f *testing.F) {
	f.Add(int64(0), []byte("SQLite format 2"), int64(-1))
	f.Add(int64(16), []byte{0x12, 0x34}, int64(-1))    // page size
	f.Add(int64(28), []byte{0, 0, 0x7f, 0}, int64(-1)) // database size
	f.Add(int64(60), []byte{0, 0, 0, 9}, int64(-1))    // user_version
	f.Add(int64(100), []byte{0xff, 0xff, 0xff}, int64(-1))
	f.Add(int64(4096), make([]byte, 4096), int64(-1))
	f.Add(int64(3*4096+2048), make([]byte, 2048), int64(-1))
	f.Add(int64(0), []byte{}, int64(4096*2+100))
	f.Add(int64(0), []byte{}, int64(0))
	f.Fuzz(func(t *testing.T, at int64, patch []byte, cut int64) {
		orig, err := fuzzBoard()
		require.NoError(t, err)
		if at < 0 || at > int64(len(orig)) || len(patch) > 8192 {
			return
		}
		file := append([]byte(nil), orig...)
		file = append(file[:at], append(patch, file[min(int64(len(file)), at+int64(len(patch))):]...)...)
		if cut >= 0 && cut < int64(len(file)) {
			file = file[:cut]
		}
		path := filepath.Join(t.TempDir(), "board.db")
		require.NoError(t, os.WriteFile(path, file, 0o600))

		acceptable := func(err error) bool {
			return err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNewerSchema)
		}
		var stage atomic.Value
		stage.Store("open")
		watchdog := time.AfterFunc(testtime.Bound(10*time.Second), func() {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			panic(fmt.Sprintf("stuck in %v on at=%d len=%d cut=%d\n%s", stage.Load(), at, len(patch), cut, buf[:n]))
		})
		defer watchdog.Stop()
		b, err := Open(path, &Options{BusyTimeout: time.Second})
		require.True(t, acceptable(err), "open: %v", err)
		if err != nil {
			return
		}
		defer b.Close()
		stage.Store("list")
		_, err = listAll(t, b)
		require.True(t, acceptable(err), "list: %v", err)
		stage.Store("post")
		_, err = b.Post(t.Context(), "user:fuzz", actions.Draft{Title: "after"})
		require.True(t, acceptable(err), "post: %v", err)
		stage.Store("next")
		_, err = b.Next(t.Context(), mint(t, "fuzz"), "", 0)
		require.True(t, acceptable(err), "next: %v", err)
		stage.Store("members")
		_, err = b.Members(t.Context())
		require.True(t, acceptable(err), "members: %v", err)
		stage.Store("close")
	})
}
