package boardpage

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tractat-us/bee/actions"
	"github.com/tractat-us/bee/actions/board"
)

// BenchmarkPostToEvent measures how long a post takes to reach an open
// event stream when it is made through another handle on the board file,
// as another process would make it: the board's wake-up, the watcher, the
// hub and the stream. (The browser then fetches the fragment; the browser
// tests log that whole path, from bee post to the row on the page.)
//
//	go test -run '^$' -bench PostToEvent -benchtime 200x ./internal/boardpage/
func BenchmarkPostToEvent(b *testing.B) {
	p := newPage(b, nil)
	other, err := board.Open(p.path, nil)
	require.NoError(b, err)
	defer other.Close()
	cookie := p.login()
	next, hangUp := p.events(cookie)
	defer hangUp()
	next()
	i := 0
	for b.Loop() {
		i++
		_, err := other.Post(b.Context(), tester, actions.Draft{Title: "post " + strconv.Itoa(i)})
		require.NoError(b, err)
		require.NotEmpty(b, next())
	}
}
