package pebble

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrLocked is returned (wrapped) by Open when the data directory is held
// by another open store: another process (a running petrel serve, or a
// maintenance command), or another Store of this process. Compare with
// errors.Is.
var ErrLocked = errors.New("store/pebble: the data directory is locked by another open store")

// dirLock is the lock Open takes on the data directory before it opens
// pebble (which is handed the lock through pebble.Options.Lock). It is
// released by release, after pebble is closed.
type dirLock struct {
	pl  *pebble.Lock
	key string // in openDirs; "" when not on the OS filesystem
}

// openDirs holds the data directories this process has open on the OS
// filesystem (absolute, with symbolic links resolved). Pebble refuses a
// second lock in one process only by the name it was given, and with an
// untyped error; a POSIX record lock never conflicts within the process
// that holds it, so this map is what keeps two Stores of one process off
// one directory, whatever path each was given.
var openDirs struct {
	mu   sync.Mutex
	dirs map[string]struct{}
}

// lockDir creates the directory path on fsys if missing and takes its
// lock. A directory held elsewhere gives an error wrapping ErrLocked.
func lockDir(fsys vfs.FS, path string) (*dirLock, error) {
	osFS := fsys == nil || fsys == vfs.Default
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := fsys.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	l := &dirLock{}
	if osFS {
		key, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		if k, err := filepath.EvalSymlinks(key); err == nil {
			key = k
		}
		openDirs.mu.Lock()
		defer openDirs.mu.Unlock()
		if _, held := openDirs.dirs[key]; held {
			return nil, fmt.Errorf("%w (by this process)", ErrLocked)
		}
		l.key = key
	}
	pl, err := pebble.LockDirectory(path, fsys)
	if err != nil {
		if heldElsewhere(err) {
			return nil, fmt.Errorf("%w (by another process: %v)", ErrLocked, err)
		}
		return nil, err
	}
	l.pl = pl
	if l.key != "" {
		if openDirs.dirs == nil {
			openDirs.dirs = make(map[string]struct{})
		}
		openDirs.dirs[l.key] = struct{}{}
	}
	return l, nil
}

// heldElsewhere reports whether err is the lock of the directory's LOCK
// file failing because another process holds it: pebble's vfs returns
// the fcntl(F_SETLK) error as it is, EAGAIN or EACCES by POSIX (its
// in-memory filesystem mimics it with EAGAIN). Failing to create the LOCK
// file is a *fs.PathError (permission denied, say), not a held lock.
func heldElsewhere(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false
	}
	var errno syscall.Errno
	return errors.As(err, &errno) && (errno == syscall.EAGAIN || errno == syscall.EACCES)
}

// release releases the lock; pebble must be closed first (or never have
// been opened with it).
func (l *dirLock) release() error {
	err := l.pl.Close()
	if l.key != "" {
		openDirs.mu.Lock()
		delete(openDirs.dirs, l.key)
		openDirs.mu.Unlock()
	}
	return err
}
