package pebble

import "syscall"

// diskSpace returns the bytes available to unprivileged users and the
// size of the file system holding path, or zeros.
func diskSpace(path string) (free, size int64) {
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) != nil {
		return 0, 0
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize
}
