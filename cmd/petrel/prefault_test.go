//go:build linux && cgo

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPrefault runs petrel verify (which waits on stdin) and reads the
// resident size of the executable's read-only mappings in
// /proc/PID/smaps once it has answered a line: internal/prefault's ELF
// constructor maps every page of them, so Rss equals Size; with
// PETREL_PREFAULT=0 only the pages faulted in (with fault-around) are,
// which must be fewer, or the test could not tell the two apart.
func TestPrefault(t *testing.T) {
	bin := petrelBin(t)
	prefaulted := func(env string) (rss, size int64) {
		t.Helper()
		cmd := exec.Command(bin, "verify")
		cmd.Env = append(os.Environ(), env)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		errs, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer in.Close()
		// Past start-up once it has read and rejected a line.
		fmt.Fprintln(in, "not an event")
		line, err := bufio.NewReader(errs).ReadString('\n')
		if !strings.Contains(line, "line 1: not an event") {
			t.Fatalf("petrel verify answered %q (%v)", line, err)
		}
		go io.Copy(io.Discard, errs)
		smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		exe, err := filepath.EvalSymlinks(bin)
		if err != nil {
			t.Fatal(err)
		}
		rss, size = readOnlyMappings(t, smaps, exe)
		if size == 0 {
			t.Fatalf("no read-only mapping of %s in smaps:\n%.3000s", exe, smaps)
		}
		return rss, size
	}
	rss, size := prefaulted("PETREL_PREFAULT=1")
	if rss != size {
		t.Errorf("prefaulted: %d of %d KiB of petrel's read-only mappings resident, want all", rss, size)
	}
	rss0, size0 := prefaulted("PETREL_PREFAULT=0")
	if size0 != size {
		t.Fatalf("mappings of %d and %d KiB", size, size0)
	}
	if rss0 == size0 {
		t.Skipf("without the prefault all %d KiB were resident too: this kernel's fault-around maps the whole binary, so the test cannot tell", size0)
	}
	t.Logf("resident: %d of %d KiB prefaulted, %d without", rss, size, rss0)
}

// readOnlyMappings adds up the Rss and Size (KiB) of exe's mappings
// without write permission in an smaps file.
func readOnlyMappings(t *testing.T, smaps []byte, exe string) (rss, size int64) {
	in := false
	for line := range bytes.Lines(smaps) {
		f := strings.Fields(string(line))
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			// A mapping's header: range perms offset dev inode [path].
			in = len(f) == 6 && f[5] == exe && f[1][1] == '-'
		case in && len(f) == 3 && (f[0] == "Rss:" || f[0] == "Size:"):
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			if f[0] == "Rss:" {
				rss += n
			} else {
				size += n
			}
		}
	}
	return rss, size
}
