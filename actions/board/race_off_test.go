//go:build !race

package board

// raceEnabled: see race_on_test.go.
const raceEnabled = false
