//go:build !linux

package startup

// TopUp does nothing: start-up maps nothing elsewhere than Linux.
func TopUp() {}
