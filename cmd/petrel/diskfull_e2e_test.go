package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// mountTmpfs mounts a tmpfs of size bytes at a new directory and
// unmounts it when the test ends. It skips the test if mounting is not
// possible (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size int64, ro bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var flags uintptr
	if ro {
		flags = syscall.MS_RDONLY
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): the disk-full test needs root or CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// freeBytes is the space available on the filesystem holding path.
func freeBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fill allocates a file at path leaving about leave bytes free on its
// filesystem (all of it, if leave is 0).
func fill(t *testing.T, path string, leave int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := freeBytes(t, path) - leave
	if n <= 0 {
		return
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fallocate %d: %v", n, err)
	}
	if leave == 0 { // whatever fallocate left over
		buf := make([]byte, 4096)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
	}
}

// TestDiskFull runs petrel serve with its store on a small tmpfs that is
// then filled to the last byte: every EVENT is answered OK false
// "error: ..." (never true), stored events are still served, ephemeral
// events are still delivered live, /stats and the log say why; once space
// is freed writes resume without a restart, and after a restart every
// acknowledged event is there and no refused one is.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	const reserve = 8 << 20
	mnt := mountTmpfs(t, 48<<20, false)
	bin := petrelBin(t)
	env := []string{fmt.Sprintf("PETREL_STORE_MIN_FREE_BYTES=%d", reserve)}
	data := filepath.Join(mnt, "data")
	p := startServeProc(t, bin, env, "--data", data, "--listen", "127.0.0.1:0")

	key := relaytest.NewKey("disk-full")
	pub := relaytest.Dial(t, p.URL)
	defer pub.Close()
	var acked []nostr.ID
	for i := 0; i < 20; i++ {
		ev := key.Note(fmt.Sprintf("before %d", i))
		pub.MustPublish(ev)
		acked = append(acked, ev.ID)
	}
	sub := relaytest.Dial(t, p.URL)
	defer sub.Close()
	sub.Req("live", `{"kinds":[1,20001],"limit":0}`)

	filler := filepath.Join(mnt, "filler")
	fill(t, filler, 0)
	t.Logf("filled: %d bytes free", freeBytes(t, mnt))
	var refused []nostr.ID
	for i := 0; i < 10; i++ {
		ev := key.Note(fmt.Sprintf("during %d", i))
		m := pub.Publish(ev)
		if m.OK || !strings.HasPrefix(m.Message, "error: ") {
			t.Fatalf("EVENT on a full disk: OK %v %q; want false, error:", m.OK, m.Message)
		}
		refused = append(refused, ev.ID)
	}
	st := p.Stats(t)
	if !st.StoreDiskFull || st.StoreFreeBytes >= reserve || st.EventsRejected["error"] != 10 {
		t.Fatalf("/stats on a full disk: store_disk_full %v, store_free_bytes %d, rejected %v", st.StoreDiskFull, st.StoreFreeBytes, st.EventsRejected)
	}
	if !strings.Contains(p.Log(), "refusing writes: the disk is nearly full") {
		t.Fatalf("the log does not say why writes are refused:\n%s", p.Log())
	}
	// Reads and live delivery of what is not stored go on.
	reader := relaytest.Dial(t, p.URL)
	if got := reader.Req("all", `{"kinds":[1]}`); len(got) != len(acked) {
		t.Fatalf("REQ on a full disk: %d events, want %d", len(got), len(acked))
	}
	reader.Close()
	eph := key.Event(20001, "ephemeral on a full disk", nil, 0)
	pub.MustPublish(eph)
	if m := sub.Read(); m.Type != "EVENT" || m.Event.ID != eph.ID {
		t.Fatalf("subscriber got %+v, want the ephemeral event", m)
	}

	// Space returns: writes resume, live delivery too.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after := key.Note("after")
	pub.MustPublish(after)
	acked = append(acked, after.ID)
	if m := sub.Read(); m.Type != "EVENT" || m.Event.ID != after.ID {
		t.Fatalf("subscriber got %+v, want the event stored after space returned", m)
	}
	if st := p.Stats(t); st.StoreDiskFull {
		t.Fatal("/stats still says store_disk_full after space returned")
	}
	if !strings.Contains(p.Log(), "accepting writes again") {
		t.Fatalf("the log does not say writes resumed:\n%s", p.Log())
	}

	// Nothing acknowledged is lost, nothing refused is stored.
	p.stop()
	p = startServeProc(t, bin, env, "--data", data, "--listen", "127.0.0.1:0")
	c := relaytest.Dial(t, p.URL)
	defer c.Close()
	got := map[nostr.ID]bool{}
	for _, ev := range c.Req("all", `{"kinds":[1]}`) {
		got[ev.ID] = true
	}
	for _, id := range acked {
		if !got[id] {
			t.Errorf("acknowledged event %s lost", id.Hex())
		}
	}
	for _, id := range refused {
		if got[id] {
			t.Errorf("refused event %s stored", id.Hex())
		}
	}
	if len(got) != len(acked) {
		t.Fatalf("%d events stored, want the %d acknowledged", len(got), len(acked))
	}
	report(t, "disk full: tmpfs of 48 MiB filled to 0 bytes free; %d EVENTs answered OK false \"error:\" (0 true), %d stored events read, ephemeral event delivered live; after freeing space writes resumed without a restart; %d acknowledged, %d found after a restart, 0 refused stored",
		len(refused), len(acked)-1, len(acked), len(got))
}

// TestServeUnwritableDataDir: petrel serve exits with status 1 and one
// line naming the directory and the reason when its data directory cannot
// be written: under a regular file, on a read-only filesystem (fresh or
// holding a store), or on a filesystem with less free space than the
// reserve.
func TestServeUnwritableDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	dir := t.TempDir()
	bin := petrelBin(t)
	run := func(data, reason string, env ...string) {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--data", data, "--listen", "127.0.0.1:0")
		cmd.Env = append(append(os.Environ(), "PETREL_CONFIG="), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("serve --data %s still running after 30s:\n%s", data, stderr.String())
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("serve --data %s: %v, want exit status 1:\n%s", data, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		// The directory named once by petrel (the system's error may name
		// it again), not once more by the store's own wrapper.
		if !strings.HasPrefix(last, "petrel: open store "+data+": ") || !strings.Contains(last, reason) || strings.Contains(last, "open pebble store") {
			t.Fatalf("serve --data %s: last line %q, want the directory and %q", data, last, reason)
		}
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run(filepath.Join(file, "data"), "not a directory")

	ro := mountTmpfs(t, 4<<20, true)
	run(filepath.Join(ro, "data"), "read-only file system")

	// A store made, then its filesystem remounted read-only.
	rw := mountTmpfs(t, 16<<20, false)
	data := filepath.Join(rw, "data")
	p := startServeProc(t, bin, []string{"PETREL_STORE_MIN_FREE_BYTES=1048576"}, "--data", data, "--listen", "127.0.0.1:0")
	p.stop()
	if err := syscall.Mount("", rw, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	run(data, "read-only file system", "PETREL_STORE_MIN_FREE_BYTES=1048576")
	if err := syscall.Mount("", rw, "", syscall.MS_REMOUNT, ""); err != nil {
		t.Fatalf("remount read-write: %v", err)
	}

	// Less free space than the reserve (the default, 512 MiB, on 16 MiB).
	small := mountTmpfs(t, 16<<20, false)
	run(filepath.Join(small, "data"), "store: disk full")
	report(t, "unwritable data directory: 4 cases (a file in the path, read-only tmpfs fresh and with a store, less free space than the reserve), each exit status 1 with one line naming the directory and the reason")
}
