package boardtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/identity"
)

// The environment of a role process. StartProc sets EnvRole and
// EnvLocation; tests add the others as they need them. A board's package
// may read more of its own (see RoleOpener).
const (
	EnvRole     = "BEE_BOARDTEST_ROLE"     // the role to run
	EnvLocation = "BEE_BOARDTEST_LOCATION" // the board's location
	EnvLease    = "BEE_BOARDTEST_LEASE"    // the board's lease in ms (0: its default)
	EnvWaiters  = "BEE_BOARDTEST_WAITERS"  // claimer: concurrent identities (default 1)
	EnvMS       = "BEE_BOARDTEST_MS"       // rate: how long to claim; claimer: how long each claim's work takes (ms)
	EnvAgent    = "BEE_BOARDTEST_AGENT"    // waiter: its agent name (default "waiter")
)

// EnvMillis returns the environment variable name read as a number of
// milliseconds; unset or not a number is 0.
func EnvMillis(name string) time.Duration {
	n, _ := strconv.Atoi(os.Getenv(name))
	return time.Duration(n) * time.Millisecond
}

// An Out is a role's stdout: one report a line, never two interleaved.
type Out struct{ mu sync.Mutex }

// Say writes one report line.
func (o *Out) Say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// A Role runs in a child process on board b: the lines of stdin arrive on
// cmds, reports go to out, and ctx ends when stdin closes (cmds is closed
// then too). A Role returns nil to exit 0.
type Role[B actions.Board] func(ctx context.Context, b B, out *Out, cmds <-chan string) error

// A RoleOpener opens the board a role runs on, at location, with the
// options the role and the environment ask for; out lets the board's own
// hooks report (a waiter says "sleeping" before it sleeps, where the board
// can tell).
type RoleOpener[B actions.Board] func(role, location string, out *Out) (B, error)

// RunRole, in a process StartProc started, runs the role EnvRole names on
// the board open opens, and exits: 0 when the role returns nil, else 1 with
// the error on stderr. Elsewhere it returns at once: call it first in
// TestMain. The roles are the shared ones (claimer, holder, poster, waiter,
// rate, worker; see each) and more, a board's own, which take precedence.
func RunRole[B actions.Board](open RoleOpener[B], more map[string]Role[B]) {
	role := os.Getenv(EnvRole)
	if role == "" {
		return
	}
	if err := runRole(role, open, more); err != nil {
		fmt.Fprintf(os.Stderr, "role %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRole[B actions.Board](role string, open RoleOpener[B], more map[string]Role[B]) error {
	run := more[role]
	if run == nil {
		shared := sharedRoles[role]
		if shared == nil {
			return fmt.Errorf("unknown role %q", role)
		}
		run = func(ctx context.Context, b B, out *Out, cmds <-chan string) error { return shared(ctx, b, out, cmds) }
	}
	out := &Out{}
	b, err := open(role, os.Getenv(EnvLocation), out)
	if err != nil {
		return err
	}
	defer b.Close()

	// Closing stdin ends the role; stdin also carries commands.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmds := make(chan string)
	go func() {
		defer cancel()
		defer close(cmds)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
	}()
	return run(ctx, b, out, cmds)
}

var sharedRoles = map[string]Role[actions.Board]{
	"claimer": roleClaimer,
	"holder":  roleHolder,
	"poster":  rolePoster,
	"waiter":  roleWaiter,
	"rate":    roleRate,
	"worker":  roleWorker,
}

func joinNew(ctx context.Context, b actions.Board, name string) (identity.ID, error) {
	who, err := identity.Mint(name)
	if err != nil {
		return "", err
	}
	return who, b.Join(ctx, actions.Member{ID: who, PID: os.Getpid()})
}

// roleClaimer runs EnvWaiters identities, each claiming and finishing as
// fast as it can (after EnvMS of work; the result is its identity). It
// reports "ready" once all have joined, then "got <id> <identity>" per
// claim and "done <id>" per finish, and departs them all at the end.
func roleClaimer(ctx context.Context, b actions.Board, out *Out, _ <-chan string) error {
	n, _ := strconv.Atoi(os.Getenv(EnvWaiters))
	ids := make([]identity.ID, max(n, 1))
	for i := range ids {
		var err error
		if ids[i], err = joinNew(ctx, b, "claimer"); err != nil {
			return err
		}
	}
	out.Say("ready")
	work := EnvMillis(EnvMS)
	errs := make(chan error, len(ids))
	for _, who := range ids {
		go func() { errs <- claimAll(ctx, b, out, who, work) }()
	}
	var first error
	for range ids {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	for _, who := range ids {
		if err := b.Depart(context.WithoutCancel(ctx), who); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// A Claim is one claim a claimer reported: "got <id> <identity>".
type Claim struct{ ID, Who string }

// Claims returns the claims among a claimer's report lines, in order.
func Claims(lines []string) []Claim {
	var cs []Claim
	for _, line := range lines {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "got" {
			cs = append(cs, Claim{ID: f[1], Who: f[2]})
		}
	}
	return cs
}

// claimAll claims and finishes as who until ctx ends.
func claimAll(ctx context.Context, b actions.Board, out *Out, who identity.ID, work time.Duration) error {
	cursor := actions.Cursor("")
	for {
		p, err := b.Next(ctx, who, cursor, 2*time.Second)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		cursor = p.Cursor
		for _, r := range p.Records {
			out.Say("got %s %s", r.ID, who)
			time.Sleep(work) // the work itself
			if _, err := b.Finish(ctx, who, r.ID, string(who)); err != nil {
				return fmt.Errorf("finish %s: %w", r.ID, err)
			}
			out.Say("done %s", r.ID)
		}
	}
}

// roleHolder claims one action, reports "claimed <id> <identity>", and
// holds it until killed or its stdin closes.
func roleHolder(ctx context.Context, b actions.Board, out *Out, _ <-chan string) error {
	who, err := joinNew(ctx, b, "holder")
	if err != nil {
		return err
	}
	p, err := b.Next(ctx, who, "", 10*time.Second)
	if err != nil {
		return err
	}
	if len(p.Records) == 0 {
		return errors.New("nothing to claim")
	}
	out.Say("claimed %s %s", p.Records[0].ID, who)
	<-ctx.Done()
	return nil
}

// rolePoster reports "ready", then posts one action per "post <title>"
// line and reports "posted <id>"; a title of "now" becomes "t0=<unix ns
// just before the post>", for measuring latency.
func rolePoster(ctx context.Context, b actions.Board, out *Out, cmds <-chan string) error {
	out.Say("ready")
	for cmd := range cmds {
		title, ok := strings.CutPrefix(cmd, "post ")
		if !ok {
			return fmt.Errorf("unknown command %q", cmd)
		}
		if title == "now" {
			title = "t0=" + strconv.FormatInt(time.Now().UnixNano(), 10)
		}
		r, err := b.Post(ctx, "user:poster", actions.Draft{Title: title})
		if err != nil {
			return err
		}
		out.Say("posted %s", r.ID)
	}
	return nil
}

// roleWaiter joins an identity of agent EnvAgent ("waiter" when unset),
// reports "ready" and waits for actions with long timeouts, reporting
// "got <id> <unix ns> <title>" per claim, which it finishes at once.
func roleWaiter(ctx context.Context, b actions.Board, out *Out, _ <-chan string) error {
	name := os.Getenv(EnvAgent)
	if name == "" {
		name = "waiter"
	}
	who, err := joinNew(ctx, b, name)
	if err != nil {
		return err
	}
	defer b.Depart(context.WithoutCancel(ctx), who)
	out.Say("ready")
	for {
		p, err := b.Next(ctx, who, "", time.Minute)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range p.Records {
			out.Say("got %s %d %s", r.ID, time.Now().UnixNano(), r.Title)
			if _, err := b.Finish(ctx, who, r.ID, ""); err != nil {
				if ctx.Err() != nil { // the test ended it as it finished
					return nil
				}
				return err
			}
		}
	}
}

// roleRate reports "ready", waits for a "go" line, then claims (without
// finishing) as fast as it can for EnvMS and reports "count <claims>".
func roleRate(ctx context.Context, b actions.Board, out *Out, cmds <-chan string) error {
	who, err := joinNew(ctx, b, "rate")
	if err != nil {
		return err
	}
	defer b.Depart(context.WithoutCancel(ctx), who)
	out.Say("ready")
	if cmd := <-cmds; cmd != "go" {
		return fmt.Errorf("want go, got %q", cmd)
	}
	end := time.Now().Add(EnvMillis(EnvMS))
	count := 0
	for time.Now().Before(end) {
		p, err := b.Next(ctx, who, "", time.Second)
		if err != nil {
			return err
		}
		count += len(p.Records)
	}
	out.Say("count %d", count)
	return nil
}

// roleWorker joins one identity of agent "worker" and reports "ready
// <identity>"; then per line: "claim" claims with Next and reports
// "claimed <id>"; "finish <id> <result>", "fail <id> <reason>" end it and
// report "ended <id> <state>" (a result "now" becomes "t0=<unix ns just
// before the finish>", for measuring latency); "finishat <id> <unix ns>"
// finishes it at that moment (for races between processes); errors are
// reported as "error <text>".
func roleWorker(ctx context.Context, b actions.Board, out *Out, cmds <-chan string) error {
	who, err := joinNew(ctx, b, "worker")
	if err != nil {
		return err
	}
	out.Say("ready %s", who)
	for cmd := range cmds {
		f := strings.SplitN(cmd, " ", 3)
		var rec actions.Record
		switch {
		case f[0] == "claim":
			p, err := b.Next(ctx, who, "", 10*time.Second)
			if err != nil || len(p.Records) == 0 {
				out.Say("error nothing claimed: %v", err)
				continue
			}
			out.Say("claimed %s", p.Records[0].ID)
			continue
		case f[0] == "finish" && len(f) == 3:
			result := f[2]
			if result == "now" { // for measuring latency
				result = "t0=" + strconv.FormatInt(time.Now().UnixNano(), 10)
			}
			rec, err = b.Finish(ctx, who, f[1], result)
		case f[0] == "fail" && len(f) == 3:
			rec, err = b.Fail(ctx, who, f[1], f[2])
		case f[0] == "finishat" && len(f) == 3:
			rec, err = finishAt(ctx, b, who, f[1], f[2])
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			out.Say("error %v", err)
			continue
		}
		out.Say("ended %s %s", rec.ID, rec.State)
	}
	return b.Depart(context.WithoutCancel(ctx), who)
}

// finishAt finishes id as who once the wall clock reaches at (unix ns).
func finishAt(ctx context.Context, b actions.Board, who identity.ID, id, at string) (actions.Record, error) {
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return actions.Record{}, fmt.Errorf("finishat: %w", err)
	}
	time.Sleep(time.Until(time.Unix(0, ns)))
	return b.Finish(ctx, who, id, "")
}
