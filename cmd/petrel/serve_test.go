package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
)

// TestServeLockedDataDir runs petrel serve on a data directory another
// petrel serve holds: it must exit with status 1 and the same line the
// maintenance commands print, and leave the running relay alone.
func TestServeLockedDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	dir := t.TempDir()
	bin := petrelBin(t)
	data := filepath.Join(dir, "data")
	env := append(os.Environ(), "PETREL_CONFIG=")

	holder := exec.Command(bin, "serve", "--data", data, "--listen", "127.0.0.1:0")
	holder.Env = env
	logs, err := holder.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		holder.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { holder.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			holder.Process.Kill()
			<-done
		}
	})
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "petrel listening") {
				listening <- true
				io.Copy(io.Discard, logs)
				return
			}
		}
		listening <- false
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatal("the first petrel serve exited before listening")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the first petrel serve is not listening after 60s")
	}

	run := func(args ...string) (lastLine string, status int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			status = ee.ExitCode()
		default:
			t.Fatalf("%v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		return lines[len(lines)-1], status
	}
	want := "petrel: " + data + ": " + errStoreLocked.Error()
	f := func(args ...string) {
		t.Helper()
		line, status := run(append(args, "--data", data)...)
		if status != 1 || line != want {
			t.Fatalf("%v on a held data directory: exit %d, %q; want exit 1, %q", args, status, line, want)
		}
	}
	f("serve", "--listen", "127.0.0.1:0")
	// sync and migrate cannot go through the relay: they say what to do.
	if line, status := run("sync", "ws://127.0.0.1:1", "-q", "--data", data); status != 1 || line != "petrel: "+data+": the data directory is held by a running petrel serve: sync the relay instead, petrel sync ws://127.0.0.1:1 --from ws://HOST:PORT (the address it listens on)" {
		t.Fatalf("sync into a held data directory: exit %d, %q", status, line)
	}
	if line, status := run("migrate", "--from", "pebble:"+data, "--to", "pebble:"+filepath.Join(dir, "copy")); status != 1 || !strings.HasPrefix(line, "petrel: --from: "+data+": the data directory is held by a running petrel serve, and the source must not change during a migrate: stop it first, or migrate a copy (petrel backup DIR") {
		t.Fatalf("migrate from a held data directory: exit %d, %q", status, line)
	}
	// scan, export, delete, compact and import ask the running relay
	// instead (TestToolsOnRunningServe, TestDeleteOnRunningServe,
	// TestImportOnRunningServe).
	if line, status := run("scan", "--count", "--data", data); status != 0 || line != "" {
		t.Fatalf("scan --count beside the running relay: exit %d, last stderr line %q", status, line)
	}
	if line, status := run("delete", "--dry-run", "--filter", `{"kinds":[1]}`, "--data", data); status != 0 || line != "" {
		t.Fatalf("delete --dry-run beside the running relay: exit %d, last stderr line %q", status, line)
	}
	if line, status := run("compact", "-q", "--data", data); status != 0 || line != "" {
		t.Fatalf("compact beside the running relay: exit %d, last stderr line %q", status, line)
	}

	// The refused serve did not take the running relay's control socket.
	if fi, err := os.Lstat(filepath.Join(data, cli.ControlSocketName)); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		t.Fatalf("control socket of the running relay after the refused serve: %v", err)
	}
}

// TestLogDurations: the JSON log writes durations as the text log and
// docs/operations.md do ("startup":"41ms"), not as integer nanoseconds.
func TestLogDurations(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var b bytes.Buffer
		log, err := newLoggerTo(&b, config.Log{Level: "info", Format: format})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("petrel listening", "startup", 41*time.Millisecond, "n", 3)
		want := map[string]string{"json": `"startup":"41ms","n":3`, "text": `startup=41ms n=3`}[format]
		if !strings.Contains(b.String(), want) {
			t.Fatalf("%s log: %q, want it to contain %q", format, b.String(), want)
		}
	}
}
