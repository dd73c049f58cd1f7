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

func read(r *rows, body string) func() (actions.Record, actions.Cursor, error) {
	return func() (actions.Record, actions.Cursor, error) {
		return actions.Record{Seq: int64(r.at), Body: body}, actions.Cursor(strconv.Itoa(r.at)), nil
	}
}

func TestFill_AllRows(t *testing.T) {
	r := &rows{n: 3}
	p := actions.Page{Records: []actions.Record{}, Cursor: "0"}
	require.NoError(t, Fill(&p, r, read(r, "small")))
	require.Len(t, p.Records, 3)
	require.Equal(t, actions.Cursor("3"), p.Cursor)
}

func TestFill_StopsNearMaxBytes(t *testing.T) {
	r := &rows{n: 100}
	big := strings.Repeat("x", MaxBytes/4)
	p := actions.Page{Cursor: "0"}
	require.NoError(t, Fill(&p, r, read(r, big)))
	require.Len(t, p.Records, 4, "the page stops once it holds MaxBytes")
	require.Equal(t, actions.Cursor("4"), p.Cursor)

	r = &rows{n: 2}
	p = actions.Page{Cursor: "0"}
	require.NoError(t, Fill(&p, r, read(r, strings.Repeat("x", 2*MaxBytes))))
	require.Len(t, p.Records, 1, "one record however large")
}

func TestFill_Errors(t *testing.T) {
	boom := errors.New("boom")
	r := &rows{n: 1, err: boom}
	p := actions.Page{}
	require.ErrorIs(t, Fill(&p, r, read(r, "")), boom)

	r = &rows{n: 3}
	err := Fill(&p, r, func() (actions.Record, actions.Cursor, error) { return actions.Record{}, "", boom })
	require.ErrorIs(t, err, boom)
}
