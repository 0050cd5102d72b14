package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeCannotListen runs petrel serve on addresses it cannot listen
// on: it must exit with status 1 at once (not hang in the network
// engine's stop, as it did), its last line naming the address and the
// reason, before it creates a store. The 10-second bound detects a hang; it is not a timing.
func TestServeCannotListen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	dir := t.TempDir()
	bin := petrelBin(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	n := 0
	f := func(addr, reason string) {
		t.Helper()
		n++
		data := filepath.Join(dir, "data"+strconv.Itoa(n))
		cmd := exec.Command(bin, "serve", "--listen", addr, "--data", data)
		cmd.Env = append(os.Environ(), "PETREL_CONFIG=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("serve --listen %s still running after 10s; stderr:\n%s", addr, stderr.String())
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("serve --listen %s: %v; want exit status 1; stderr:\n%s", addr, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		if prefix := "petrel: listen on " + addr + ": "; !strings.HasPrefix(last, prefix) || !strings.HasSuffix(last, reason) {
			t.Fatalf("serve --listen %s: last line %q; want %q...%q", addr, last, prefix, reason)
		}
		for _, l := range lines[:len(lines)-1] {
			if strings.Contains(l, "listening") {
				t.Fatalf("serve --listen %s logged %q before failing", addr, l)
			}
		}
		// The address is taken before the store is opened: no store is
		// created for a relay that cannot serve.
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("serve --listen %s left %s behind (%v)", addr, data, err)
		}
	}
	f(busy.Addr().String(), "address already in use")
	f("nonsense", "missing port in address")
	f("127.0.0.1:99999", "invalid port")
}
