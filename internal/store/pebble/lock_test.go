package pebble

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestLockedInProcess: a second Store of this process on an open
// directory gets ErrLocked, whatever path names the directory, until the
// first is closed.
func TestLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, Options{Path: dir, PurgeInterval: -1})
	f := func(path string) {
		t.Helper()
		s2, err := Open(Options{Path: path, Logger: quiet, PurgeInterval: -1})
		if !errors.Is(err, ErrLocked) {
			if s2 != nil {
				s2.Close()
			}
			t.Fatalf("second Open of %s: %v, want ErrLocked", path, err)
		}
	}
	f(dir)
	f(dir + "/.")
	f(link)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: link, PurgeInterval: -1}) // released by Close
	f(dir)
	s.Close()

	// Pebble's in-memory filesystem refuses a second lock itself.
	fs := vfs.NewMem()
	m := openTest(t, Options{Path: "/db", FS: fs, PurgeInterval: -1})
	if _, err := Open(Options{Path: "/db", FS: fs, Logger: quiet, PurgeInterval: -1}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open on the in-memory filesystem: %v, want ErrLocked", err)
	}
	m.Close()
	openTest(t, Options{Path: "/db", FS: fs, PurgeInterval: -1}).Close()

	// A directory that cannot be created is not a held lock.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Path: file, Logger: quiet}); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("Open of a regular file: %v, want an error other than ErrLocked", err)
	}
}

const lockChildEnv = "PETREL_STORE_LOCK_CHILD"

// TestLockChild is the child process of TestLockedByProcess; it does
// nothing unless lockChildEnv names a directory. It opens the store
// there, prints "ready", and closes it when its stdin ends.
func TestLockChild(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("child process of TestLockedByProcess")
	}
	s, err := Open(Options{Path: dir, Logger: quiet, PurgeInterval: -1})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	done := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString(0)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // never outlive a lost parent
	}
	s.Close()
	os.Exit(0)
}

// TestLockedByProcess: while another process has the store open, Open
// fails with ErrLocked (the fcntl lock's EAGAIN or EACCES), and succeeds
// once that process has closed it.
func TestLockedByProcess(t *testing.T) {
	if os.Getenv(lockChildEnv) != "" {
		t.Skip("in the child")
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd, stdin, sc := startChild(t, "TestLockChild", []string{lockChildEnv + "=" + dir}, true)
	if !sc.Scan() || sc.Text() != "ready" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("child: %q %v", sc.Text(), sc.Err())
	}
	_, err := Open(Options{Path: dir, Logger: quiet, PurgeInterval: -1})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "by another process") {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("Open while another process holds the store: %v, want ErrLocked by another process", err)
	}
	stdin.Close()
	for sc.Scan() { // drain until the child exits
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	openTest(t, Options{Path: dir, PurgeInterval: -1}).Close()
}

// startChild starts this test binary running only the test named run,
// with env added to the environment, and returns the process, a pipe to
// its stdin (nil unless withStdin) and a scanner of its stdout; its
// stderr is the test's.
func startChild(t *testing.T, run string, env []string, withStdin bool) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	var stdin io.WriteCloser
	if withStdin {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, bufio.NewScanner(out)
}
