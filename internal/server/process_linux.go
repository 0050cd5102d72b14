package server

import (
	"encoding/binary"
	"sync"
	"syscall"
)

var direntBuf = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// countDirents counts the entries of the /proc/self/fd-like directory
// path, less ".", ".." and the descriptor reading it, without allocating
// per entry (linux_dirent64 records: their length is at offset 16).
// It returns -1 if the directory cannot be read.
func countDirents(path string) int {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	defer syscall.Close(fd)
	bp := direntBuf.Get().(*[]byte)
	defer direntBuf.Put(bp)
	buf := *bp
	n := 0
	for {
		m, err := syscall.ReadDirent(fd, buf)
		if err != nil {
			return -1
		}
		if m <= 0 {
			break
		}
		for off := 0; off+19 <= m; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 {
				break
			}
			if name := buf[off+19 : off+reclen]; !(name[0] == '.' && (name[1] == 0 || name[1] == '.' && name[2] == 0)) {
				n++
			}
			off += reclen
		}
	}
	return n - 1
}
