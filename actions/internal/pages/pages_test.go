package pages

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
)

// rows yields n rows, then err.
type rows struct {
	n, at int
	err   error
}

func (r *rows) Next() bool { r.at++; return r.at <= r.n }
func (r *rows) Err() error { return r.err }

func scan(r *rows, body string) func(extra ...any) (actions.Record, error) {
	return func(extra ...any) (actions.Record, error) {
		for _, e := range extra {
			*e.(*int64) = int64(10 * r.at)
		}
		return actions.Record{Seq: int64(r.at), Body: body}, nil
	}
}

func seqCursor(r Row) actions.Cursor { return actions.Cursor(strconv.FormatInt(r.Seq, 10)) }

func TestRead_AllRows(t *testing.T) {
	r := &rows{n: 3}
	got, err := Read(r, true, scan(r, "small"))
	require.NoError(t, err)
	p := Page(got, "0", seqCursor)
	require.Len(t, p.Records, 3)
	require.Equal(t, actions.Cursor("3"), p.Cursor)
	require.Equal(t, int64(30), got[2].Rev)
}

func TestRead_StopsNearMaxBytes(t *testing.T) {
	r := &rows{n: 100}
	big := strings.Repeat("x", MaxBytes/4)
	got, err := Read(r, false, scan(r, big))
	require.NoError(t, err)
	p := Page(got, "0", seqCursor)
	require.Len(t, p.Records, 4, "the page stops once it holds MaxBytes")
	require.Equal(t, actions.Cursor("4"), p.Cursor)
	require.Zero(t, got[0].Rev, "no rev asked for")

	r = &rows{n: 2}
	got, err = Read(r, false, scan(r, strings.Repeat("x", 2*MaxBytes)))
	require.NoError(t, err)
	require.Len(t, got, 1, "one record however large")
}

func TestPage_EmptyKeepsItsCursor(t *testing.T) {
	p := Page(nil, "7", seqCursor)
	require.NotNil(t, p.Records)
	require.Empty(t, p.Records)
	require.Equal(t, actions.Cursor("7"), p.Cursor)
}

func TestRead_Errors(t *testing.T) {
	boom := errors.New("boom")
	r := &rows{n: 1, err: boom}
	_, err := Read(r, false, scan(r, ""))
	require.ErrorIs(t, err, boom)

	r = &rows{n: 3}
	_, err = Read(r, false, func(...any) (actions.Record, error) { return actions.Record{}, boom })
	require.ErrorIs(t, err, boom)
}
