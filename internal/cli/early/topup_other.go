//go:build !linux

package early

// topUp does nothing: internal/startup maps nothing elsewhere than Linux.
func topUp() {}
