//go:build !race

package interop

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
