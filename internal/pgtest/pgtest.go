// Package pgtest gives tests a PostgreSQL server to run against: the one
// $BEE_TEST_POSTGRES names, or else a throwaway cluster it starts itself
// from an installed PostgreSQL (Debian's postgresql package puts initdb in
// /usr/lib/postgresql/<version>/bin), in a temporary directory, on a free
// port, with its unix socket in that directory. Each test gets a database
// of its own, empty, which no other test uses until it ends.
//
// Without a server the tests that need one are skipped, except under
// CI=true, where they fail: CI must never report a skipped suite as green.
// Under -short they are skipped (SkipShort): `go test -short` is the inner
// loop, and a cluster takes seconds to start.
//
// A cluster started here runs as a child of the test process and dies with
// it (a parent-death signal), so a test binary killed at its timeout leaves
// no server behind. Run as root (as CI does), the server runs as the
// "postgres" user, since PostgreSQL refuses to run as root.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/internal/testtime"
)

// EnvURL names the variable holding the URL of a server to test against (a
// role that may create databases). When it is unset, tests start their own
// cluster.
const EnvURL = "BEE_TEST_POSTGRES"

// PasswordRole is the role a cluster started here has that logs in with a
// password over TCP (every other role is trusted), for testing wrong
// passwords.
const PasswordRole = "bee_pw"

// A Cluster is a PostgreSQL server for tests.
type Cluster struct {
	// AdminURL reaches the server as a role that may create databases,
	// without a password.
	AdminURL string
	// Host and Port are where the server listens over TCP.
	Host string
	Port int
	// Password is PasswordRole's password ("" for an external server).
	Password string

	// Set only for a cluster started here.
	dir    string // the temporary directory holding data, socket and log
	bin    string // the directory of initdb and postgres
	cred   *syscall.Credential
	mu     sync.Mutex // guards proc
	proc   *postmaster
	listen []string // listen addresses

	freeMu sync.Mutex          // guards free
	free   map[string][]string // owner role ("" for admin) -> emptied databases to hand out again
}

// Owned reports whether the cluster was started here, so that a test may
// stop and restart it.
func (c *Cluster) Owned() bool { return c.dir != "" }

// Options configure Start.
type Options struct {
	// Listen are extra addresses to listen on besides 127.0.0.1, and to
	// trust (and ask PasswordRole's password) from their /24 network.
	Listen []string
	// Durable starts the server as users run it: fsync, synchronous_commit
	// and full_page_writes on, so that every commit waits for its flush.
	// Tests run without (Shared): a commit then costs no disk flush, and
	// the suite runs several times faster. Benchmarks whose figures are
	// published run durable (see SharedDurable).
	Durable bool
}

// durability is the postgresql.conf lines of a durable server, or of the
// fast test server.
func durability(durable bool) string {
	if durable {
		return "fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n"
	}
	return "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
}

// FindBin returns the directory of an installed PostgreSQL's initdb and
// postgres: the newest under /usr/lib/postgresql, else the one on $PATH.
func FindBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on $PATH): install it (apt-get install postgresql, or run scripts/test-postgres) or set " + EnvURL)
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Start starts a throwaway cluster: initdb in a new temporary directory, a
// free port, trust for local roles and a password for PasswordRole. Stop
// it with Stop.
func Start(opts *Options) (_ *Cluster, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bee-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres cluster: %w", err)
	}
	c := &Cluster{dir: dir, bin: bin, Host: "127.0.0.1", listen: append([]string{"127.0.0.1"}, o.Listen...)}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if err := c.runAsPostgres(); err != nil {
		return nil, err
	}
	if err := c.initdb(); err != nil {
		return nil, err
	}
	if c.Port, err = freePort(); err != nil {
		return nil, fmt.Errorf("postgres cluster: %w", err)
	}
	if err := c.configure(o.Durable); err != nil {
		return nil, err
	}
	c.AdminURL = fmt.Sprintf("postgres://bee_admin@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
	if err := c.Restart(); err != nil {
		return nil, err
	}
	c.Password = randHex(12)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Exec(ctx, "postgres", fmt.Sprintf(`CREATE ROLE %s LOGIN CREATEDB PASSWORD '%s'`, PasswordRole, c.Password)); err != nil {
		return nil, err
	}
	return c, nil
}

// runAsPostgres, when this process runs as root (as CI does), makes the
// cluster's programs run as the postgres user, which PostgreSQL requires,
// and gives that user the cluster's directory.
func (c *Cluster) runAsPostgres() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("postgres cluster: running as root needs a postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return fmt.Errorf("postgres cluster: %w", err)
	}
	return nil
}

// initdb makes the cluster's data directory, with bee_admin its trusted
// superuser.
func (c *Cluster) initdb() error {
	cmd := exec.Command(filepath.Join(c.bin, "initdb"), "-D", filepath.Join(c.dir, "data"), "-U", "bee_admin", "-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("postgres cluster: initdb: %w\n%s", err, out)
	}
	return nil
}

// configure writes the server's settings (c.Port, its listen addresses,
// durable or not: see Options.Durable) and its access rules: local roles
// trusted, PasswordRole asked its password over TCP.
func (c *Cluster) configure(durable bool) error {
	data := filepath.Join(c.dir, "data")
	conf := fmt.Sprintf(`
port = %d
listen_addresses = '%s'
unix_socket_directories = '%s'
%smax_connections = 300
shared_buffers = 32MB
log_min_messages = warning
`, c.Port, strings.Join(c.listen, ","), c.dir, durability(durable))
	hba := "local all all trust\n"
	for _, addr := range c.listen {
		hba += fmt.Sprintf("host all %s %s scram-sha-256\n", PasswordRole, network(addr))
	}
	for _, addr := range c.listen {
		hba += fmt.Sprintf("host all all %s trust\n", network(addr))
	}
	if err := appendFile(filepath.Join(data, "postgresql.conf"), conf); err != nil {
		return fmt.Errorf("postgres cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fmt.Errorf("postgres cluster: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(filepath.Join(data, "pg_hba.conf"), int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("postgres cluster: %w", err)
		}
	}
	return nil
}

// network returns the /32 of a loopback address, the /24 of any other.
func network(addr string) string {
	ip := net.ParseIP(addr).To4()
	if ip == nil || ip.IsLoopback() {
		return addr + "/32"
	}
	return fmt.Sprintf("%d.%d.%d.0/24", ip[0], ip[1], ip[2])
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// A postmaster is the running server process.
type postmaster struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit, set before done closes
	log  string
}

// start runs the server. It is started from a goroutine locked to its OS
// thread, which lives as long as the server: the parent-death signal fires
// when the thread that started the child ends, not the process.
func (c *Cluster) start() (*postmaster, error) {
	logPath := filepath.Join(c.dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &postmaster{done: make(chan struct{}), log: logPath}
	p.cmd = exec.Command(filepath.Join(c.bin, "postgres"), "-D", filepath.Join(c.dir, "data"))
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		defer logf.Close()
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Restart starts the server (stopping it first if it runs) and waits until
// it accepts connections.
func (c *Cluster) Restart() error {
	if !c.Owned() {
		return errors.New("postgres cluster: an external server cannot be restarted")
	}
	if err := c.Shutdown(); err != nil {
		return err
	}
	p, err := c.start()
	if err != nil {
		return fmt.Errorf("postgres cluster: start: %w", err)
	}
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.AdminURL)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		select {
		case <-p.done:
			log, _ := os.ReadFile(p.log)
			return fmt.Errorf("postgres cluster: server exited (%v):\n%s", p.err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(p.log)
			return fmt.Errorf("postgres cluster: not accepting connections after 30 s: %w\n%s", err, log)
		}
	}
}

// Shutdown stops the server with a fast shutdown (SIGINT: clients are
// disconnected, as when an administrator restarts it) and waits for it to
// exit. The data stays, so Restart brings the same databases back.
func (c *Cluster) Shutdown() error {
	c.mu.Lock()
	p := c.proc
	c.proc = nil
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// Stop shuts the server down and removes its directory. Stop may be called
// more than once; it does nothing for an external server.
func (c *Cluster) Stop() error {
	if !c.Owned() {
		return nil
	}
	err := c.Shutdown()
	if rerr := os.RemoveAll(c.dir); err == nil {
		err = rerr
	}
	return err
}

// Exec runs sql as the admin role in database db.
func (c *Cluster) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.URL(db))
	if err != nil {
		return fmt.Errorf("postgres cluster: connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("postgres cluster: %s: %w", sql, err)
	}
	return nil
}

// URL returns the admin URL for database db.
func (c *Cluster) URL(db string) string {
	u, err := url.Parse(c.AdminURL)
	if err != nil {
		panic(err) // AdminURL is checked when the cluster is made
	}
	u.Path = "/" + db
	return u.String()
}

// URLFor returns the URL of database db as role with password, over TCP
// at host (the cluster's own host when "").
func (c *Cluster) URLFor(db, role, password, host string) string {
	if host == "" {
		host = c.Host
	}
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(host, strconv.Itoa(c.Port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	if password != "" {
		u.User = url.UserPassword(role, password)
	} else {
		u.User = url.User(role)
	}
	return u.String()
}

// NewDB returns the name of a database of c, empty, for tb alone until tb
// ends.
func (c *Cluster) NewDB(tb testing.TB) string {
	tb.Helper()
	return c.NewDBFor(tb, "")
}

// NewDBFor is NewDB for a database owned by role (which may then create
// tables in its public schema); "" is the admin role.
//
// On a cluster started here a database is emptied when its test ends and
// handed to the next test that asks, since making one (copying template1)
// costs far more than emptying one. An external server's databases are
// dropped, so that none is left behind on it.
func (c *Cluster) NewDBFor(tb testing.TB, role string) string {
	tb.Helper()
	name := c.takeFree(role)
	if name == "" {
		name = "bee_test_" + randHex(6)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		create := "CREATE DATABASE " + name
		if role != "" {
			create += " OWNER " + role
		}
		if err := c.Exec(ctx, "postgres", create); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c.Owned() {
			c.mu.Lock()
			down := c.proc == nil
			c.mu.Unlock()
			if down {
				return // stopped (its directory goes with it) or shut down by the test
			}
			err := c.empty(ctx, name)
			if err == nil {
				c.freeMu.Lock()
				defer c.freeMu.Unlock()
				if c.free == nil {
					c.free = map[string][]string{}
				}
				c.free[role] = append(c.free[role], name)
				return
			}
			tb.Logf("empty test database %s (dropping it instead): %v", name, err)
		}
		if err := c.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("drop test database: %v", err)
		}
	})
	return name
}

// takeFree returns an emptied database owned by role, or "".
func (c *Cluster) takeFree(role string) string {
	c.freeMu.Lock()
	defer c.freeMu.Unlock()
	free := c.free[role]
	if len(free) == 0 {
		return ""
	}
	name := free[len(free)-1]
	c.free[role] = free[:len(free)-1]
	return name
}

// emptySQL leaves a database as CREATE DATABASE makes it from template1 on
// PostgreSQL 15 and later: every schema a test made is dropped with what it
// holds, and the public schema is made again, owned by the database's
// owner, usable by everyone.
const emptySQL = `DO $$
DECLARE s text;
BEGIN
	IF current_setting('server_version_num')::int < 150000 THEN
		RAISE EXCEPTION 'PostgreSQL before 15 has another public schema';
	END IF;
	FOR s IN SELECT nspname FROM pg_namespace
		WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
	LOOP
		EXECUTE format('DROP SCHEMA %I CASCADE', s);
	END LOOP;
	CREATE SCHEMA public AUTHORIZATION pg_database_owner;
	GRANT USAGE ON SCHEMA public TO PUBLIC;
	COMMENT ON SCHEMA public IS 'standard public schema';
END $$`

// empty ends every other session on database db and drops what its test
// made there.
func (c *Cluster) empty(ctx context.Context, db string) error {
	if err := c.Exec(ctx, "postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, db); err != nil {
		return err
	}
	return c.Exec(ctx, db, emptySQL)
}

// A sharedCluster is a cluster a test binary starts once, on first use.
type sharedCluster struct {
	mu  sync.Mutex
	c   *Cluster
	err error
}

var shared, sharedDurable sharedCluster

// SkipShort skips tb under -short: it needs a PostgreSQL server, which is
// not the inner loop. Shared calls it; a test that calls Start calls it
// first.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a PostgreSQL server: skipped under -short")
	}
}

// Shared returns the test binary's server: $BEE_TEST_POSTGRES when set,
// else a cluster started on first use and stopped by StopShared (call it
// from TestMain after m.Run). Without either it skips tb, or fails it
// under CI=true. Under -short it skips tb (SkipShort).
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	return shared.get(tb, nil)
}

// SharedDurable is Shared for a durable server (see Options.Durable):
// $BEE_TEST_POSTGRES when set (the caller's to make durable), else a
// durable cluster of its own, started on first use beside Shared's and
// stopped by StopShared too.
func SharedDurable(tb testing.TB) *Cluster {
	tb.Helper()
	return sharedDurable.get(tb, &Options{Durable: true})
}

func (s *sharedCluster) get(tb testing.TB, opts *Options) *Cluster {
	tb.Helper()
	SkipShort(tb)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == nil && s.err == nil {
		if u := os.Getenv(EnvURL); u != "" {
			if _, err := url.Parse(u); err != nil {
				s.err = fmt.Errorf("%s is not a URL: %w", EnvURL, err)
			} else {
				s.c = external(u)
			}
		} else {
			s.c, s.err = Start(opts)
		}
	}
	if s.err != nil {
		Unavailable(tb, s.err)
	}
	return s.c
}

func external(admin string) *Cluster {
	u, _ := url.Parse(admin)
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		port = 5432
	}
	return &Cluster{AdminURL: admin, Host: u.Hostname(), Port: port}
}

// StopShared stops the clusters Shared and SharedDurable started, if any.
func StopShared() {
	for _, s := range []*sharedCluster{&shared, &sharedDurable} {
		s.stop()
	}
}

func (s *sharedCluster) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		if err := s.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop cluster:", err)
		}
		s.c = nil
	}
}

// Main runs m's tests, stops the cluster Shared started and, when the tests
// passed, fails if any goroutine is left running (goleak); then it exits
// the process with the outcome. Call it from TestMain, last.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	if code == 0 {
		if err := testtime.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Unavailable ends tb because err keeps it from having a server: a skip
// for a developer without PostgreSQL, a failure under CI=true.
func Unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no PostgreSQL server for this test, and CI=true forbids skipping it: %v", err)
	}
	tb.Skipf("no PostgreSQL server: %v", err)
}
