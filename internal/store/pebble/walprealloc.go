package pebble

import (
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// tmpfsWALFS keeps pebble from preallocating its write-ahead logs on a
// tmpfs. pebble reserves 110% of the memtable size (70 MiB with the
// default 64 MiB memtable) each time a log file grows past what was
// reserved, with fallocate, from the goroutine that writes the log, so
// every commit waits for it. On a disk filesystem that is a metadata
// update (0.0-0.1 ms on ext4 here); on a tmpfs it allocates and zeroes
// the pages: 15-48 ms on the 2-core test machine, seven times in 12 s
// at 2,000 events/s, which was the whole OK latency tail of the
// relay's store on tmpfs (docs/BENCHMARKS.md, issue 19). A tmpfs gains
// nothing from it (its pages are allocated as they are written either
// way) and holds the reserved memory for as long as the file lives.
// Other filesystems are left as pebble uses them.
type tmpfsWALFS struct {
	vfs.FS
}

// onTmpfs reports whether dir, or the nearest existing directory above
// it, is on a tmpfs.
func onTmpfs(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err == nil {
			return st.Type == unix.TMPFS_MAGIC
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

func (fs tmpfsWALFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || category != "pebble-wal" {
		return f, err
	}
	return noPreallocFile{f}, nil
}

func (fs tmpfsWALFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || category != "pebble-wal" {
		return f, err
	}
	return noPreallocFile{f}, nil
}

// Unwrap returns the filesystem underneath (pebble's vfs.Root).
func (fs tmpfsWALFS) Unwrap() vfs.FS { return fs.FS }

type noPreallocFile struct {
	vfs.File
}

func (noPreallocFile) Preallocate(offset, length int64) error { return nil }
