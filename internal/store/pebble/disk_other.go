//go:build !linux

package pebble

// diskSpace is not measured on this system.
func diskSpace(string) (free, size int64) { return 0, 0 }
