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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/petrel-relay/petrel/internal/startup"
)

// TestStartup runs petrel verify (a client command, which waits on
// stdin) and, once it has answered a line, reads what internal/startup's
// ELF constructor did to it:
//   - the resident size of the executable's read-only mappings in
//     /proc/PID/smaps: with PETREL_PREFAULT=1 every page is mapped, so
//     Rss equals Size; with PETREL_PREFAULT=0 only the pages faulted in
//     (with fault-around) are, which must be fewer, or the test could not
//     tell the two apart; by default, as the first touch the constructor
//     times decides, which must agree with this test binary's own
//     decision where that was clear of the threshold (the two time a
//     fault on the same machine moments apart);
//   - the copied share of its writable data mapping (.data,
//     .noptrdata): all of it with PETREL_PREFAULT=1, less without;
//   - every thread's timer slack: 1 ms; with PETREL_CLIENT_SLACK=0, and
//     for a command that keeps running (stream), what this process has
//     (the kernel's default, 50 µs, unless the test was started with
//     another). That serve keeps its own is TestServeTimerSlack's.
func TestStartup(t *testing.T) {
	bin := petrelBin(t)
	populate := true // MADV_POPULATE_READ is known (Linux 5.14)
	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Madvise(page, unix.MADV_POPULATE_READ); err == unix.EINVAL {
		populate = false
	}
	unix.Munmap(page)
	inherited, err := threadSlack()
	if err != nil {
		t.Fatal(err)
	}
	if inherited == autoTimerSlack {
		t.Skipf("this test runs with a timer slack of %v, which petrel sets", inherited)
	}
	exe, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		rss, size int64 // KiB
		// copied and dataSize: exe's writable data mapping (.data,
		// .noptrdata), its pages copied on write (Anonymous) and its Size.
		copied, dataSize int64
		slack            []time.Duration
	}
	// run starts petrel with args, waits for ready on its stderr (past
	// start-up), and reads what the constructor did.
	run := func(args []string, ready string, env ...string) result {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
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
		defer cmd.Process.Kill()
		defer in.Close()
		fmt.Fprintln(in, "not an event") // for verify
		sc, found := bufio.NewScanner(errs), false
		for !found && sc.Scan() {
			found = strings.Contains(sc.Text(), ready)
		}
		if !found {
			t.Fatalf("petrel %s: no %q on stderr (%v)", strings.Join(args, " "), ready, sc.Err())
		}
		go io.Copy(io.Discard, errs)
		var r result
		smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		r.rss, r.size = exeMappings(t, smaps, exe, false, "Rss")
		r.copied, r.dataSize = exeMappings(t, smaps, exe, true, "Anonymous")
		if r.size == 0 || r.dataSize == 0 {
			t.Fatalf("no read-only or no writable mapping of %s in smaps:\n%.3000s", exe, smaps)
		}
		if r.slack, err = threadsSlack(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		return r
	}
	verify := []string{"verify"}
	const verified = "line 1: not an event"
	on := run(verify, verified, "PETREL_PREFAULT=1")
	if populate && on.rss != on.size {
		t.Errorf("prefaulted: %d of %d KiB of petrel's read-only mappings resident, want all", on.rss, on.size)
	}
	if populate && on.copied != on.dataSize {
		t.Errorf("prefaulted: %d of %d KiB of petrel's writable data copied, want all", on.copied, on.dataSize)
	}
	if !slices.Equal(on.slack, []time.Duration{autoTimerSlack}) {
		t.Errorf("a client command's threads have a timer slack of %v, want %v for all", on.slack, autoTimerSlack)
	}
	off := run(verify, verified, "PETREL_PREFAULT=0", "PETREL_CLIENT_SLACK=0")
	if !slices.Equal(off.slack, []time.Duration{inherited}) {
		t.Errorf("with PETREL_CLIENT_SLACK=0 the threads have a timer slack of %v, want the inherited %v for all", off.slack, inherited)
	}
	// A command that keeps running (here stream, retrying a closed
	// port) keeps the slack it inherited, and is prefaulted as well.
	long := run([]string{"stream", "ws://127.0.0.1:1", "--dir", "down"}, "stream interrupted", "PETREL_PREFAULT=1")
	if !slices.Equal(long.slack, []time.Duration{inherited}) {
		t.Errorf("petrel stream's threads have a timer slack of %v, want the inherited %v for all", long.slack, inherited)
	}
	if populate && long.rss != long.size {
		t.Errorf("petrel stream: %d of %d KiB of its read-only mappings resident, want all", long.rss, long.size)
	}
	if off.size != on.size {
		t.Fatalf("mappings of %d and %d KiB", on.size, off.size)
	}
	if !populate {
		t.Skip("this kernel has no MADV_POPULATE_READ (Linux 5.14): only the slack was checked")
	}
	if off.copied == off.dataSize {
		t.Errorf("without the prefault all %d KiB of petrel's writable data were copied: the test cannot tell, or something else writes it all", off.dataSize)
	}
	if off.rss == off.size {
		t.Skipf("without the prefault all %d KiB were resident too: this kernel's fault-around maps the whole binary, so the test cannot tell", off.size)
	}
	t.Logf("resident: %d of %d KiB prefaulted, %d without", on.rss, on.size, off.rss)
	auto := run(verify, verified, "PETREL_PREFAULT=")
	ns, costly := startup.FaultNanos(), int64(startup.FaultCostlyNanos)
	if ns == 0 {
		t.Logf("this test binary ran with PETREL_PREFAULT set: the default's decision was not checked (%d of %d KiB resident)", auto.rss, auto.size)
		return
	}
	if ns > costly/2 && ns < 2*costly {
		t.Logf("a first touch took %d ns here, too near the threshold (%d) to predict the child's decision: %d of %d KiB resident", ns, costly, auto.rss, auto.size)
		return
	}
	if want := startup.Prefaulted(); (auto.rss == auto.size) != want {
		t.Errorf("by default (a first touch took %d ns here, threshold %d): %d of %d KiB resident, want prefaulted %v", ns, costly, auto.rss, auto.size, want)
	}
	t.Logf("by default (a first touch took %d ns here): prefaulted %v", ns, startup.Prefaulted())
}

// exeMappings adds up a field (KiB) and the Size of exe's mappings in an
// smaps file, those with write permission or those without: Rss of the
// read-only ones (mapped), Anonymous of the writable ones (copied on
// write).
func exeMappings(t *testing.T, smaps []byte, exe string, writable bool, field string) (got, size int64) {
	in := false
	for line := range bytes.Lines(smaps) {
		f := strings.Fields(string(line))
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			// A mapping's header: range perms offset dev inode [path].
			in = len(f) == 6 && f[5] == exe && (f[1][1] == 'w') == writable
		case in && len(f) == 3 && (f[0] == field+":" || f[0] == "Size:"):
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			if f[0] == "Size:" {
				size += n
			} else {
				got += n
			}
		}
	}
	return got, size
}
