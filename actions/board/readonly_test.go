package board

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tractat-us/bee/actions"
)

// envAsNobody marks a test binary that runAsNobody started.
const envAsNobody = "BEE_TEST_AS_NOBODY"

// nobody is the uid and gid runAsNobody runs a test as.
const nobody = "65534"

// runAsNobody runs the calling test as another user when it runs as root,
// which writes any folder whatever its mode bits say, so that a folder
// the test makes read-only is read-only: the test binary runs the test
// again under setpriv as nobody, and runAsNobody reports true when that
// run passed (the caller then returns). It skips, saying why, only where
// setpriv is missing.
func runAsNobody(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	if os.Getenv(envAsNobody) != "" {
		t.Fatal("still root under setpriv")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("root writes any folder whatever its mode, and setpriv (util-linux) is missing to run this test as another user")
	}
	// A copy of the test binary, and a temp folder, that nobody may use.
	// Not t.TempDir: its parent folder is root's alone.
	dir, err := os.MkdirTemp("", "bee-as-nobody-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	bin := filepath.Join(dir, "board.test")
	require.NoError(t, os.WriteFile(bin, self, 0o755))
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o755))
	require.NoError(t, os.Chmod(tmp, 0o1777))
	cmd := exec.Command(setpriv, "--reuid", nobody, "--regid", nobody, "--clear-groups",
		bin, "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envAsNobody+"=1", "TMPDIR="+tmp, "HOME="+tmp)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s as uid %s:\n%s", t.Name(), nobody, out)
	require.Contains(t, string(out), "--- PASS: "+t.Name()+" ", "%s as uid %s did not pass:\n%s", t.Name(), nobody, out)
	require.NotContains(t, string(out), "--- SKIP", "%s as uid %s skipped:\n%s", t.Name(), nobody, out)
	t.Logf("as uid %s:\n%s", nobody, out)
	return true
}

// readOnlyDir makes dir read-only until the test ends.
func readOnlyDir(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.Chmod(dir, 0o500))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) }) // so that TempDir can remove it
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// requireReadOnlyRefusal requires err to be the refusal of a write on a
// board in the read-only folder dir: ErrReadOnly, naming the folder and
// saying what to do.
func requireReadOnlyRefusal(t *testing.T, err error, dir string) {
	t.Helper()
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorContains(t, err, "its folder "+dir+" is not writable")
	require.ErrorContains(t, err, "chmod u+w "+dir)
	require.ErrorContains(t, err, "--board or $BEE_BOARD")
}

// A board whose folder its user cannot write opens read-only: every read
// works, and every write is refused with ErrReadOnly, naming the folder and
// saying what to do; nothing in the folder changes. Before, Open failed
// ("open write lock: permission denied", or SQLite's "attempt to write a
// readonly database" when the lock file existed).
func TestOpen_ReadOnlyFolder(t *testing.T) {
	t.Parallel()
	if runAsNobody(t) {
		return
	}
	alice := mint(t, "alice")

	t.Run("nothing has it open", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "board.db")
		w, err := Open(path, nil)
		require.NoError(t, err)
		a1 := post(t, w, alice, "", "first")
		post(t, w, alice, "bob", "second")
		require.NoError(t, w.Close())
		before := dirNames(t, dir)
		require.NotContains(t, before, "board.db-wal", "a closed board leaves no WAL")
		readOnlyDir(t, dir)

		b := openTest(t, path, nil)
		page, err := b.List(t.Context(), "")
		require.NoError(t, err)
		require.Len(t, page.Records, 2)
		got, err := b.Get(t.Context(), a1.ID)
		require.NoError(t, err)
		require.Equal(t, "first", got.Title)
		_, err = b.Members(t.Context())
		require.NoError(t, err)
		_, err = b.Reservations(t.Context(), "")
		require.NoError(t, err)

		_, err = b.Post(t.Context(), actions.Agent(alice), actions.Draft{Title: "third"})
		requireReadOnlyRefusal(t, err, dir)
		_, err = b.Cancel(t.Context(), actions.Agent(alice), a1.ID, "no")
		requireReadOnlyRefusal(t, err, dir)
		require.Equal(t, before, dirNames(t, dir), "a read-only board makes no file")
	})

	t.Run("a writer has it open", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "board.db")
		w := openTest(t, path, nil)
		post(t, w, alice, "", "first")
		readOnlyDir(t, dir)

		b := openTest(t, path, nil)
		// The writer can still write the files it has (they are
		// writable); the read-only Board reads through its WAL and sees
		// what it writes.
		post(t, w, alice, "", "second")
		page, err := b.List(t.Context(), "")
		require.NoError(t, err)
		require.Len(t, page.Records, 2)
		_, err = b.Post(t.Context(), actions.Agent(alice), actions.Draft{Title: "third"})
		requireReadOnlyRefusal(t, err, dir)
	})

	t.Run("a writer starts after it opened", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "board.db")
		w, err := Open(path, nil)
		require.NoError(t, err)
		post(t, w, alice, "", "first")
		require.NoError(t, w.Close())
		readOnlyDir(t, dir)
		b := openTest(t, path, nil) // reads the file alone: no WAL

		require.NoError(t, os.Chmod(dir, 0o700))
		w = openTest(t, path, nil)
		post(t, w, alice, "", "second")
		// A read from the file alone, while a WAL holds commits, would
		// miss them (or tear): refused, saying to run it again.
		_, err = b.List(t.Context(), "")
		require.ErrorIs(t, err, ErrReadOnly)
		require.ErrorContains(t, err, "run the command again")
	})

	t.Run("no board there", func(t *testing.T) {
		dir := t.TempDir()
		readOnlyDir(t, dir)
		_, err := Open(filepath.Join(dir, "board.db"), nil)
		require.ErrorIs(t, err, ErrReadOnly)
		require.ErrorContains(t, err, "no board at "+filepath.Join(dir, "board.db"))
		require.Empty(t, dirNames(t, dir))
	})

	t.Run("files not writable either", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "board.db")
		w, err := Open(path, nil)
		require.NoError(t, err)
		post(t, w, alice, "", "first")
		require.NoError(t, w.Close())
		for _, name := range dirNames(t, dir) {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
				require.NoError(t, os.Chmod(filepath.Join(dir, name), 0o400))
			}
		}
		readOnlyDir(t, dir)
		b := openTest(t, path, nil)
		page, err := b.List(t.Context(), "")
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		_, err = b.Post(t.Context(), actions.Agent(alice), actions.Draft{Title: "second"})
		requireReadOnlyRefusal(t, err, dir)
	})
}

// A board file its user cannot write, in a folder it can, opens read-only
// too, and the refusal names the file.
func TestOpen_ReadOnlyFile(t *testing.T) {
	t.Parallel()
	if runAsNobody(t) {
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "board.db")
	w, err := Open(path, nil)
	require.NoError(t, err)
	post(t, w, mint(t, "alice"), "", "first")
	require.NoError(t, w.Close())
	require.NoError(t, os.Chmod(path, 0o400))

	b := openTest(t, path, nil)
	page, err := b.List(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	_, err = b.Post(t.Context(), actions.Agent(mint(t, "alice")), actions.Draft{Title: "second"})
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorContains(t, err, "the board file is not writable")
	require.ErrorContains(t, err, "chmod u+w "+path)
}
