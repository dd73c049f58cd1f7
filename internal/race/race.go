// Package race says whether the race detector is built into this binary,
// as the standard library's internal/race does. Tests use it to build the
// commands they run the way they were built themselves and to allow for
// the detector's slowdown.
package race
