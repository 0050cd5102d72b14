//go:build race

package nostr

// raceEnabled reports whether the race detector is on: sync.Pool drops
// items at random then, so allocation counts are not meaningful.
const raceEnabled = true
