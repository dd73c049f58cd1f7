package testio

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuffer_ConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "%d\n", i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 800, strings.Count(b.String(), "\n"))
}
