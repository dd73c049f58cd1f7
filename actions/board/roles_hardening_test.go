package board

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/identity"
	"github.com/tractat-us/bee/internal/testtime"
)

// More worker roles (see roles_test.go), for the hardening tests: a lock
// holder that stops itself, a Board that keeps its file open while the test
// moves it, and claimants for the chaos test.

// roleOptions adjust a role's Options before its Board opens.
var roleOptions = map[string]func(*Options, *boardtest.Out){
	"staller": func(o *Options, out *boardtest.Out) { o.holdingLock = stallHook(out) },
}

// moreRoles are run by runRole like its own.
var moreRoles = map[string]boardtest.Role[*Board]{
	"staller":  roleStaller,
	"follower": roleFollower,
	"chaos":    roleChaos,
	"locker":   roleLocker,
	"sleeper":  roleSleeper,
}

// roleLocker takes the board's write lock through a descriptor of its
// own, starts a "sleeper" child that inherits that descriptor, reports
// "child <pid>" and ends: the lock is then held by the child alone, while
// /proc/locks still names the locker.
func roleLocker(_ context.Context, b *Board, out *boardtest.Out, _ <-chan string) error {
	f, err := os.OpenFile(b.path+"-lock", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), boardtest.EnvRole+"=sleeper")
	cmd.ExtraFiles = []*os.File{f} // the same open file, and so its flock
	if err := cmd.Start(); err != nil {
		return err
	}
	out.Say("child %d", cmd.Process.Pid)
	return cmd.Process.Release()
}

// roleSleeper sleeps, holding what it inherited, until it is killed (or
// a bound passes: it has no stdin to end it).
func roleSleeper(context.Context, *Board, *boardtest.Out, <-chan string) error {
	time.Sleep(testtime.Bound(2 * time.Minute))
	return nil
}

// stallNext makes the staller's next write stop its process while it holds
// the write lock.
var stallNext atomic.Bool

func stallHook(out *boardtest.Out) func() {
	return func() {
		if stallNext.CompareAndSwap(true, false) {
			// A SIGSTOP sent to the process lands a little later than
			// kill returns (another thread takes it): wait for the
			// SIGCONT that ends the stop, so that the lock is held
			// throughout, as by a process stopped mid-write.
			cont := make(chan os.Signal, 1)
			signal.Notify(cont, syscall.SIGCONT)
			defer signal.Stop(cont)
			out.Say("holding")
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			<-cont
		}
	}
}

// roleStaller posts one action per "post <title>" line and reports
// "posted <id>"; for "stall <title>" it reports "holding" once it holds the
// write lock and stops itself there, posting when continued.
func roleStaller(ctx context.Context, b *Board, out *boardtest.Out, cmds <-chan string) error {
	out.Say("ready")
	for cmd := range cmds {
		verb, title, _ := strings.Cut(cmd, " ")
		switch verb {
		case "post":
		case "stall":
			stallNext.Store(true)
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
		r, err := b.Post(ctx, "user:staller", actions.Draft{Title: title})
		if err != nil {
			return err
		}
		out.Say("posted %s", r.ID)
	}
	return nil
}

// roleFollower joins an identity and claims whatever it may, reporting
// "ready", then "got <id> <title>" per claim and "err <error>" per failed
// Next; after two failures it reports "stopped" and waits for the end.
func roleFollower(ctx context.Context, b *Board, out *boardtest.Out, _ <-chan string) error {
	who, err := identity.Mint("follower")
	if err != nil {
		return err
	}
	if err := b.Join(ctx, actions.Member{ID: who, PID: os.Getpid()}); err != nil {
		return err
	}
	out.Say("ready")
	failures := 0
	for failures < 2 {
		// Long, so that only the file watch can end it early (stretched
		// as the test's bound is: this process has its factor).
		p, err := b.Next(ctx, who, "", testtime.Bound(30*time.Second))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			out.Say("err %s", strings.ReplaceAll(err.Error(), "\n", " "))
			failures++
			continue
		}
		for _, r := range p.Records {
			out.Say("got %s %s", r.ID, r.Title)
		}
	}
	out.Say("stopped")
	<-ctx.Done()
	return nil
}

// roleChaos runs boardtest.EnvWaiters identities, each claiming and
// finishing (after working on the claim up to boardtest.EnvMS) as fast
// as it can while the test kills and stops processes. It reports "ready"
// once all have joined, then per claim "got <id> <identity> <claimed at,
// unix ms>", and per finish "done <id> <identity>" or, when the board
// refused it because the claim had gone to another identity meanwhile,
// "lost <id> <identity>". An identity stopped past its lease is departed by
// the board; it reports "departed <identity>" and carries on under a new
// one. A busy board (a stopped lock holder) is waited out, not an error.
func roleChaos(ctx context.Context, b *Board, out *boardtest.Out, _ <-chan string) error {
	n, _ := strconv.Atoi(os.Getenv(boardtest.EnvWaiters))
	n = max(n, 1)
	join := func() (identity.ID, error) {
		id, err := identity.Mint("chaos")
		if err != nil {
			return "", err
		}
		for {
			err := b.Join(ctx, actions.Member{ID: id, PID: os.Getpid()})
			if !errors.Is(err, ErrLocked) {
				return id, err
			}
		}
	}
	first := make([]identity.ID, n)
	for i := range first {
		var err error
		if first[i], err = join(); err != nil {
			if ctx.Err() != nil {
				return nil // ended before it joined: a late replacement
			}
			return err
		}
	}
	out.Say("ready")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	for _, who := range first {
		wg.Go(func() {
			err := func() error {
				for {
					err := chaosClaim(ctx, b, out, who)
					if !errors.Is(err, actions.ErrDeparted) {
						if derr := b.Depart(context.Background(), who); err == nil {
							err = derr
						}
						return err
					}
					out.Say("departed %s", who)
					if who, err = join(); err != nil {
						if ctx.Err() != nil {
							return nil // the test is ending the role
						}
						return err
					}
				}
			}()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && fail == nil {
				fail = err
			}
		})
	}
	wg.Wait()
	return fail
}

// chaosClaim claims and finishes for who until ctx ends (nil) or who turns
// out to have departed (ErrDeparted).
func chaosClaim(ctx context.Context, b *Board, out *boardtest.Out, who identity.ID) error {
	for {
		p, err := b.Next(ctx, who, "", time.Second)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrLocked):
			continue
		case err != nil:
			return err
		}
		for _, r := range p.Records {
			out.Say("got %s %s %d", r.ID, who, r.ClaimedAt.UnixMilli())
			if work := boardtest.EnvMillis(boardtest.EnvMS); work > 0 {
				time.Sleep(rand.N(work)) // the work the claim is for
			}
			for {
				_, err := b.Finish(ctx, who, r.ID, string(who))
				switch {
				case err == nil:
					out.Say("done %s %s", r.ID, who)
				case errors.Is(err, actions.ErrNotHeld), errors.Is(err, actions.ErrEnded):
					out.Say("lost %s %s", r.ID, who)
				case errors.Is(err, ErrLocked) && ctx.Err() == nil:
					continue
				case ctx.Err() != nil:
					return nil
				default:
					return fmt.Errorf("finish %s: %w", r.ID, err)
				}
				break
			}
		}
	}
}

func stopProc(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }
func contProc(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
