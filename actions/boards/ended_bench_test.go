package boards

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/boardtest"
	"github.com/tractat-us/bee/internal/pgtest"
)

// BenchmarkClaimEnded measures, on each board, claim latency with no
// ended action and with many (1,000,000, or $BEE_BENCH_ENDED): one
// process posts an action for anyone, then claims it (Next, timed alone),
// then finishes it, a few hundred times; p50 and p99 of the claims. The
// ended actions are written in the benchmark's setup by one statement on
// the board's own file or database, into the table that holds ended
// actions (the hot table itself on a board that keeps them there), not
// by a million posts. It also times a List of the live actions (open,
// blocked and claimed, none of them here: what bee list shows by default),
// which must pass
// over every ended action in a table that keeps them ("list-live-µs",
// median of 20).
//
//	go test -run '^$' -bench ClaimEnded -benchtime 1x ./actions/boards/
func BenchmarkClaimEnded(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BEE_BENCH_ENDED")); err == nil && v > 0 {
		n = v
	}
	for _, kind := range []string{"file", "postgres"} {
		for _, ended := range []int{0, n} {
			b.Run(fmt.Sprintf("%s/ended=%d", kind, ended), func(b *testing.B) {
				var location string
				if kind == "file" {
					location = filepath.Join(b.TempDir(), "board.db")
				} else {
					c := pgtest.Shared(b)
					location = c.URL(c.NewDB(b))
				}
				// Open once to create the schema, then fill behind its back.
				board, err := Open(location, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := board.Close(); err != nil {
					b.Fatal(err)
				}
				if ended > 0 {
					if kind == "file" {
						fillEndedFile(b, location, ended)
					} else {
						fillEndedPG(b, location, ended)
					}
				}
				benchClaimOne(b, openBench(b, location))
			})
		}
	}
}

func benchClaimOne(b *testing.B, board actions.Board) {
	ctx := b.Context()
	who := boardtest.Mint(b, "bench")
	const claims = 300
	var lat, list []time.Duration
	for range b.N {
		for range claims {
			if _, err := board.Post(ctx, "user:bench", actions.Draft{Title: "job"}); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			p, err := board.Next(ctx, who, "", time.Second)
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			if len(p.Records) != 1 {
				b.Fatal("the action just posted was not claimed")
			}
			if _, err := board.Finish(ctx, who, p.Records[0].ID, "ok"); err != nil {
				b.Fatal(err)
			}
		}
		for range 20 {
			start := time.Now()
			p, err := board.ListFiltered(ctx, "", actions.ListFilter{States: []actions.State{actions.Open, actions.Blocked, actions.Claimed}})
			list = append(list, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			if len(p.Records) != 0 {
				b.Fatalf("%d live actions listed, want none", len(p.Records))
			}
		}
	}
	boardtest.ReportLatency(b, lat)
	b.ReportMetric(float64(median(list).Microseconds()), "list-live-µs")
	b.ReportMetric(0, "ns/op")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// fillEndedFile writes n done actions into the board file at path, in one
// transaction, with seqs and revs 1..n, below everything posted later.
func fillEndedFile(b *testing.B, path string, n int) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var split int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'ended_actions'`).Scan(&split); err != nil {
		b.Fatal(err)
	}
	table := "actions"
	if split > 0 {
		table = "ended_actions"
	}
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	now := time.Now().UnixMilli()
	_, err = tx.Exec(`WITH RECURSIVE c (x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)
		INSERT INTO `+table+` (seq, from_whom, title, body, state, holder, result, ended_by, posted_at, claimed_at, done_at, told_at, rev)
		SELECT x, 'user:bench', 'old job ' || x, 'what was to be done', 'done', 'agent:x#01234567', 'done it',
			'agent:x#01234567', ?2, ?2, ?2, ?2, x FROM c`, n, now)
	if err != nil {
		b.Fatal(err)
	}
	// Seqs are never reused: the hot table's high-water mark covers them.
	if _, err := tx.Exec(`DELETE FROM sqlite_sequence WHERE name = 'actions'`); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO sqlite_sequence (name, seq) VALUES ('actions', ?)`, n); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

// fillEndedPG writes n done actions into the PostgreSQL board at url, as
// fillEndedFile does.
func fillEndedPG(b *testing.B, url string, n int) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var split bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('bee_ended_actions') IS NOT NULL`).Scan(&split); err != nil {
		b.Fatal(err)
	}
	table, over := "bee_actions", "OVERRIDING SYSTEM VALUE"
	if split {
		table, over = "bee_ended_actions", ""
	}
	_, err = conn.Exec(ctx, `INSERT INTO `+table+` (seq, from_whom, title, body, state, holder, result, ended_by, posted_at, claimed_at, ended_at, told_at, rev)
		`+over+` SELECT x, 'user:bench', 'old job ' || x, 'what was to be done', 'done', 'agent:x#01234567', 'done it',
			'agent:x#01234567', now(), now(), now(), now(), 1 FROM generate_series(1, $1::bigint) x`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT setval(pg_get_serial_sequence('bee_actions', 'seq'), $1)`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}
}
