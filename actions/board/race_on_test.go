//go:build race

package board

// raceEnabled: the race detector slows the pure-Go SQLite about twentyfold,
// so the heaviest tests shrink to stay within seconds.
const raceEnabled = true
