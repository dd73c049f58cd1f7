package board

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The lock file's content: three fixed slots of slotSize bytes, each one
// line of text, which only bee reads and writes (the flock is what locks;
// older bees leave the file empty, and a missing or garbled slot reads as
// absent):
//
//	holder <pid> <unix ms>                   who took the write lock last, and when
//	db <dev> <inode>                         the database file the -wal and -shm files belong to
//	damaged <dev> <inode> <unix ms> <pid>    a database file a bee process found damaged
//
// A slot is written with one pwrite, never under another's feet: holder
// and db under the write lock, damaged by whoever finds the damage.
const (
	slotSize    = 64
	slotHolder  = 0
	slotDB      = 1
	slotDamaged = 2
)

// A fileID names a file by device and inode, so that a file moved or
// replaced under the same path is told apart. The zero fileID is no file.
type fileID struct{ dev, ino uint64 }

func (id fileID) String() string { return fmt.Sprintf("%d:%d", id.dev, id.ino) }

func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

// A lockRecord is what the lock file says.
type lockRecord struct {
	holderPID   int
	holderSince time.Time // zero when unknown
	db          fileID    // zero when unknown
	damaged     fileID    // zero when none
	damagedAt   time.Time
	damagedBy   int
}

func (l *writeLock) writeSlot(slot int, line string) {
	if l.f == nil {
		return
	}
	var buf [slotSize]byte
	fillSlot(buf[:], []byte(line))
	// Best effort: the record only helps a person and a later Open.
	_, _ = unix.Pwrite(l.fd, buf[:], int64(slot*slotSize))
}

// fillSlot writes line into slot, padded with spaces to a newline.
func fillSlot(slot, line []byte) {
	n := copy(slot[:slotSize-1], line)
	for i := n; i < slotSize-1; i++ {
		slot[i] = ' '
	}
	slot[slotSize-1] = '\n'
}

// noteHolder records this process as the lock's holder, from now. It runs
// at every write, under the lock, so it allocates nothing: only the lock's
// holder uses the buffers.
func (l *writeLock) noteHolder() {
	line := append(l.scratch[:0], "holder "...)
	line = strconv.AppendInt(line, int64(os.Getpid()), 10)
	line = append(line, ' ')
	line = strconv.AppendInt(line, wallMS(), 10)
	fillSlot(l.slot[:], line)
	_, _ = unix.Pwrite(l.fd, l.slot[:], slotHolder*slotSize)
}

// noteDB records id as the database file the sibling files belong to.
func (l *writeLock) noteDB(id fileID) {
	l.writeSlot(slotDB, fmt.Sprintf("db %d %d", id.dev, id.ino))
}

// damageCheckEvery is how often, at most, a writer reads the damage mark.
const damageCheckEvery = 100 * time.Millisecond

// bind makes id the database file whose damage mark the lock checks.
func (l *writeLock) bind(id fileID) {
	l.file = id
	l.mark = fmt.Appendf(nil, "damaged %d %d ", id.dev, id.ino)
}

// noteDamaged marks id damaged, for every bee process.
func (l *writeLock) noteDamaged(id fileID) {
	l.writeSlot(slotDamaged, fmt.Sprintf("damaged %d %d %d %d", id.dev, id.ino, wallMS(), os.Getpid()))
}

// record reads the lock file's record; what it cannot read is absent.
func (l *writeLock) record() lockRecord {
	var r lockRecord
	if l.f == nil {
		return r
	}
	buf := make([]byte, 3*slotSize)
	n, _ := unix.Pread(l.fd, buf, 0)
	buf = buf[:max(n, 0)]
	slot := func(i int) []string {
		if len(buf) < (i+1)*slotSize {
			return nil
		}
		return strings.Fields(string(buf[i*slotSize : (i+1)*slotSize]))
	}
	nums := func(f []string, word string, n int) []int64 {
		if len(f) != n+1 || f[0] != word {
			return nil
		}
		out := make([]int64, n)
		for i := range out {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil || v < 0 {
				return nil
			}
			out[i] = v
		}
		return out
	}
	if v := nums(slot(slotHolder), "holder", 2); v != nil {
		r.holderPID, r.holderSince = int(v[0]), time.UnixMilli(v[1])
	}
	if v := nums(slot(slotDB), "db", 2); v != nil {
		r.db = fileID{uint64(v[0]), uint64(v[1])}
	}
	if v := nums(slot(slotDamaged), "damaged", 4); v != nil {
		r.damaged = fileID{uint64(v[0]), uint64(v[1])}
		r.damagedAt, r.damagedBy = time.UnixMilli(v[2]), int(v[3])
	}
	return r
}

// damaged refuses, with ErrCorrupt, the database file the lock file marks
// damaged. It runs at every write, under the lock, and reads the mark at
// most every damageCheckEvery (a parse only when it names this file), so a
// mark another process made stops this one's writes within that.
func (l *writeLock) damaged() error {
	if l.f == nil || l.file == (fileID{}) {
		return nil
	}
	if now := time.Now(); now.Sub(l.damageCheck) < damageCheckEvery {
		return nil
	} else {
		l.damageCheck = now
	}
	n, _ := unix.Pread(l.fd, l.slot[:], slotDamaged*slotSize)
	if n < len(l.mark) || !bytes.Equal(l.slot[:len(l.mark)], l.mark) {
		return nil
	}
	if r := l.record(); r.damaged == l.file {
		return damagedErr(l.dbPath(), r)
	}
	return nil
}

func (l *writeLock) dbPath() string { return strings.TrimSuffix(l.path, "-lock") }

func damagedErr(path string, r lockRecord) error {
	return corruptErr(path, fmt.Sprintf("pid %d found it damaged %s ago", r.damagedBy, roundAge(time.Since(r.damagedAt))), nil)
}

func roundAge(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// A procLock is one lock /proc/locks lists.
type procLock struct {
	kind    string // FLOCK, POSIX, OFDLCK, ...
	write   bool
	blocked bool // a request waiting for the lock, not a lock held
	pid     int  // -1 for an OFD lock, 0 when outside this pid namespace
	file    fileID
	start   int64
	end     int64 // -1 for EOF
}

// readProcLocks lists the locks the kernel holds (Linux only). It reads
// the file in one read: the kernel lists the locks afresh for each read,
// so a list read in pieces while other processes take and drop locks can
// skip a lock that was held throughout (seen with four test suites at
// once). A read that fills the buffer is tried again with a larger one.
func readProcLocks() ([]procLock, error) {
	for size := 64 << 10; ; size *= 4 {
		raw, err := readOnce("/proc/locks", size)
		if err != nil {
			return nil, err
		}
		if len(raw) < size || size >= 16<<20 {
			return parseProcLocks(raw), nil
		}
	}
}

// readOnce reads at most size bytes of the file at path in one read.
func readOnce(path string, size int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, size)
	n, err := f.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf[:n], nil
}

// parseProcLocks reads the lines of /proc/locks it understands and skips
// the others.
func parseProcLocks(raw []byte) []procLock {
	var locks []procLock
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		// "1: POSIX  ADVISORY  WRITE 23408 fe:00:9978289 0 EOF", with "->"
		// after the number for a blocked request.
		f := strings.Fields(sc.Text())
		if len(f) > 1 && f[1] == "->" {
			f = append(f[:1:1], f[2:]...)
			if len(f) == 8 {
				f = append(f, "blocked")
			}
		}
		if len(f) < 8 {
			continue
		}
		l := procLock{kind: f[1], write: f[3] == "WRITE", blocked: len(f) > 8 && f[8] == "blocked"}
		var err error
		if l.pid, err = strconv.Atoi(f[4]); err != nil {
			continue
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(dev[0], 16, 32)
		minor, err2 := strconv.ParseUint(dev[1], 16, 32)
		ino, err3 := strconv.ParseUint(dev[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			continue
		}
		l.file = fileID{unix.Mkdev(uint32(major), uint32(minor)), ino}
		if l.start, err = strconv.ParseInt(f[6], 10, 64); err != nil {
			continue
		}
		if f[7] == "EOF" {
			l.end = -1
		} else if l.end, err = strconv.ParseInt(f[7], 10, 64); err != nil {
			continue
		}
		locks = append(locks, l)
	}
	return locks
}

// A lockHolder is a process holding a lock, as far as it can be told.
type lockHolder struct {
	pid   int
	since time.Time // zero when unknown
	// took is the process that took the lock, when that is not pid: a
	// flock belongs to the open file, so a process that inherited the
	// descriptor (a child that outlives its parent) holds it after the
	// taker is gone. -1: pid is not known (another user's process, say),
	// only that took is gone.
	took     int
	tookGone bool
}

// String says "pid 123 (bee-mcp, stopped)", or, for a lock held through
// an inherited descriptor, "pid 456 (sleep), which inherited the
// descriptor pid 123 (gone) locked".
func (h lockHolder) String() string {
	if h.took == 0 {
		return procDesc(h.pid)
	}
	taker := procDesc(h.took)
	if h.tookGone {
		taker = fmt.Sprintf("pid %d (gone)", h.took)
	}
	if h.pid <= 0 {
		return fmt.Sprintf("a process that inherited the descriptor %s locked (bee cannot see which: another user's?)", taker)
	}
	return fmt.Sprintf("%s, which inherited the descriptor %s locked", procDesc(h.pid), taker)
}

// procDesc says "pid 123 (bee-mcp, stopped)".
func procDesc(pid int) string {
	var detail []string
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		detail = append(detail, strings.TrimSpace(string(comm)))
	}
	if procStopped(pid) {
		detail = append(detail, "stopped")
	}
	if len(detail) == 0 {
		return fmt.Sprintf("pid %d", pid)
	}
	return fmt.Sprintf("pid %d (%s)", pid, strings.Join(detail, ", "))
}

// descriptorHolders lists the processes holding a descriptor of the open
// file that carries a flock of the file id: /proc/<pid>/fdinfo/<fd> lists
// the locks of the open file behind each descriptor, so a child that
// inherited a locked descriptor shows there, while /proc/locks names only
// the process that took the lock. It sees only the processes this one
// may inspect (the same user's), and runs only on the way to an error:
// it reads every descriptor's fdinfo.
func descriptorHolders(id fileID) []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fdinfo")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
	fds:
		for _, fd := range fds {
			raw, err := os.ReadFile(filepath.Join(dir, fd.Name()))
			if err != nil || !bytes.Contains(raw, []byte("FLOCK")) {
				continue
			}
			var lines []byte
			for line := range bytes.SplitSeq(raw, []byte("\n")) {
				if rest, ok := bytes.CutPrefix(line, []byte("lock:")); ok {
					lines = append(append(lines, rest...), '\n')
				}
			}
			for _, k := range parseProcLocks(lines) {
				if k.kind == "FLOCK" && k.write && !k.blocked && k.file == id {
					pids = append(pids, pid)
					break fds
				}
			}
		}
	}
	return pids
}

// procStopped reports whether process pid is stopped (SIGSTOP, Ctrl-Z).
func procStopped(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(raw, ')')
	return i >= 0 && i+2 < len(raw) && (raw[i+2] == 'T' || raw[i+2] == 't')
}

// holder says who holds the board's write lock: the process /proc/locks
// names for the lock file, else the one holding SQLite's WAL write lock in
// the -shm file (a writer that ignores the lock file); ok is false when
// neither can be told. The lock file's record adds since when, if it names
// the same process.
func (l *writeLock) holder() (h lockHolder, ok bool) {
	rec := l.record()
	locks, err := readProcLocks()
	if err != nil {
		// No /proc: trust the record while its process lives.
		if rec.holderPID > 0 && processAlive(rec.holderPID) {
			return lockHolder{pid: rec.holderPID, since: rec.holderSince}, true
		}
		return lockHolder{}, false
	}
	if l.f != nil {
		if id, err := statID(l.path); err == nil {
			for _, k := range locks {
				if k.kind == "FLOCK" && k.write && !k.blocked && k.file == id && k.pid > 0 {
					h = lockHolder{pid: k.pid}
					if rec.holderPID == k.pid {
						h.since = rec.holderSince
					}
					return inherited(h, id), true
				}
			}
		}
	}
	// SQLite's WAL write lock is byte 120 of the -shm file.
	const walWriteLock = 120
	if id, err := statID(l.dbPath() + "-shm"); err == nil {
		for _, k := range locks {
			if k.write && !k.blocked && k.file == id && k.pid > 0 && k.start <= walWriteLock && (k.end < 0 || k.end >= walWriteLock) {
				return lockHolder{pid: k.pid}, true
			}
		}
	}
	return lockHolder{}, false
}

// inherited corrects h, the holder /proc/locks names for the flock of the
// file id, when that process is gone or no longer holds the lock's open
// file: the processes that do (see descriptorHolders) hold it, through a
// descriptor they inherited.
func inherited(h lockHolder, id fileID) lockHolder {
	if h.pid == os.Getpid() {
		return h
	}
	alive := processAlive(h.pid)
	holders := descriptorHolders(id)
	if slices.Contains(holders, h.pid) || (alive && len(holders) == 0) {
		return h
	}
	out := lockHolder{pid: -1, since: h.since, took: h.pid, tookGone: !alive}
	if len(holders) > 0 {
		out.pid = holders[0]
	}
	return out
}

// users lists the processes holding any lock on the file at path (none when
// it does not exist). ok is false when /proc/locks cannot be read.
func users(path string) (pids []int, ok bool) {
	id, err := statID(path)
	if err != nil {
		return nil, true
	}
	locks, err := readProcLocks()
	if err != nil {
		return nil, false
	}
	seen := map[int]bool{}
	for _, k := range locks {
		if k.file == id && !k.blocked && !seen[k.pid] {
			seen[k.pid] = true
			pids = append(pids, k.pid)
		}
	}
	return pids, true
}
