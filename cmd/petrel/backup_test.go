package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestBackupCommand(t *testing.T) {
	evs := toolEvents()
	data := fillStore(t, evs)
	dest := filepath.Join(t.TempDir(), "backup")
	out, _, err := runTool(t, backupCmd, "", "--data", data, "--verify", dest)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "backup of "+data+" written to "+dest) || !strings.Contains(out, "verified: 40 events") {
		t.Fatalf("output %q", out)
	}
	// The copy is a store of its own, with the same events in the same order.
	if a, b := storedRaws(t, data), storedRaws(t, dest); !slices.Equal(a, b) || !sameSet(a, raws(evs)) {
		t.Fatalf("backup holds %d events, store %d", len(b), len(a))
	}
	// Writes to the store after the backup do not reach it.
	if _, _, err := runTool(t, deleteCmd, "", "--data", data, "-q", "--yes", "--filter", `{"kinds":[7]}`); err != nil {
		t.Fatal(err)
	}
	if n := len(storedRaws(t, dest)); n != 40 {
		t.Fatalf("backup holds %d events after a delete in the store", n)
	}

	bad := func(want string, args ...string) {
		t.Helper()
		_, _, err := runTool(t, backupCmd, "", args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: error %v, want %q", args, err, want)
		}
	}
	bad("already exists", "--data", data, dest)
	bad("accepts 1 arg", "--data", data)
	bad("no directory given", "--data", data, "")
	// Not inside the data directory (it would be lost with it); beside
	// it, under a name that starts the same, is another directory.
	bad("is inside the data directory "+data+": a backup there is lost with it", "--data", data, filepath.Join(data, "backup"))
	if _, _, err := runTool(t, backupCmd, "", "--data", data, data+"-backup"); err != nil {
		t.Fatalf("backup beside the data directory: %v", err)
	}
	openStoreAt(t, data)
	bad("is petrel serve running?", "--data", data, filepath.Join(t.TempDir(), "b2"))
}

// TestBackupOnline runs petrel serve (the binary) and backs its store up
// while it runs, through the control socket; then, with serve stopped,
// backs up the same directory offline although serve's socket file was
// left behind (as after a crash).
func TestBackupOnline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	dir := t.TempDir()
	bin := petrelBin(t)
	data := filepath.Join(dir, "data")
	env := append(os.Environ(), "PETREL_CONFIG=")
	serve := exec.Command(bin, "serve", "--data", data, "--listen", "127.0.0.1:0")
	serve.Env = env
	var logs relaytest.SyncBuffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = serve.Process.Signal(syscall.SIGTERM)
			_ = serve.Wait()
		}
	}
	defer stop()
	url := ""
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`url=(ws://[0-9.:]+)`).FindStringSubmatch(logs.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("serve did not start:\n%s", logs.String())
	}
	c := relaytest.Dial(t, url)
	evs := toolEvents()
	for _, ev := range evs[:30] {
		c.MustPublish(ev)
	}
	backup := func(dest string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(append([]string{"backup", "--data", data}, args...), dest)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("backup %s: %v\n%s", dest, err, out)
		}
		return string(out)
	}
	dest1 := filepath.Join(dir, "b1")
	if out := backup(dest1, "--verify"); !strings.Contains(out, "by the running relay; verified: the copy opens and holds 30 events") {
		t.Fatalf("online backup: %q", out)
	}
	for _, ev := range evs[30:] {
		c.MustPublish(ev)
	}
	// Relative destinations are the caller's, not the relay's.
	rel, err := filepath.Rel(mustGetwd(t), filepath.Join(dir, "b2"))
	if err != nil {
		t.Fatal(err)
	}
	if out := backup(rel, "--json"); !strings.Contains(out, `"dest":"`+filepath.Join(dir, "b2")+`"`) || !strings.Contains(out, `"online":true`) {
		t.Fatalf("online backup, relative dest: %q", out)
	}
	c.Close()
	stop()
	if _, err := os.Lstat(cli.ControlSocketPath(data)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the control socket outlived serve: %v", err)
	}
	if n := len(storedRaws(t, dest1)); n != 30 {
		t.Fatalf("first backup holds %d events, want 30", n)
	}
	if n := len(storedRaws(t, filepath.Join(dir, "b2"))); n != len(evs) {
		t.Fatalf("second backup holds %d events, want %d", n, len(evs))
	}
	// A socket nobody serves (serve died): backup opens the store itself.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cli.ControlSocketPath(data), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if out := backup(filepath.Join(dir, "b3"), "--verify"); strings.Contains(out, "running relay") || !strings.Contains(out, fmt.Sprintf("verified: %d events", len(evs))) {
		t.Fatalf("offline backup past a stale socket: %q", out)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
