package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestSignalTwiceAtOnce: petrel serve signalled twice at once, as `timeout
// 1h petrel serve` does, shuts down in order (the store closed, exit 0);
// SIGTERM and then SIGINT at once still exits at once (status 1). Without
// cli.SignalEcho the first case exits at once too (checked).
func TestSignalTwiceAtOnce(t *testing.T) {
	bin := petrelBin(t)
	for _, c := range []struct {
		name    string
		second  syscall.Signal
		orderly bool
	}{
		{"same", syscall.SIGTERM, true},
		{"another", syscall.SIGINT, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startServeProc(t, bin, []string{"PETREL_SERVER_SHUTDOWN_TIMEOUT=1s"},
				"--data", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0")
			holdStopOpen(t, p)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			// Two signals sent at once often merge into one pending
			// signal: the second goes once the first is received, while
			// the stop waits (up to shutdown_timeout) for a queue that
			// its subscriber does not read.
			for !strings.Contains(p.Log(), "shutting down") {
				time.Sleep(time.Millisecond)
			}
			if err := p.cmd.Process.Signal(c.second); errors.Is(err, os.ErrProcessDone) {
				t.Fatalf("the relay stopped before the second signal, its stop not held open:\n%s", p.Log())
			} else if err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				t.Fatalf("still running 30 s after two signals:\n%s", p.Log())
			}
			log, code := p.Log(), p.cmd.ProcessState.ExitCode()
			if c.orderly {
				if code != 0 || !strings.Contains(log, "msg=stopped") || strings.Contains(log, "second signal") {
					t.Fatalf("SIGTERM twice at once: exit %d, want an orderly stop (exit 0, \"stopped\"):\n%s", code, log)
				}
				return
			}
			if code != 1 || !strings.Contains(log, "second signal: exiting now") {
				t.Fatalf("SIGTERM, then SIGINT at once: exit %d, want exit 1 and \"second signal\":\n%s", code, log)
			}
		})
	}
}

// holdStopOpen gives p's stop something to wait for: a subscriber that
// never reads, with events queued for it that its socket will not take.
// An idle relay stops in a few tens of milliseconds, too soon for a test
// to be sure its signal lands during the stop.
func holdStopOpen(t *testing.T, p *serveProc) {
	t.Helper()
	sub, err := relaytest.DialWith(t, p.URL, relaytest.DialOptions{NoRead: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	sub.SendRaw(`["REQ","live",{"kinds":[1],"limit":0}]`)
	pub := relaytest.Dial(t, p.URL)
	key := relaytest.NewKey("signal")
	body := strings.Repeat("x", 16<<10)
	// The publisher reads its OKs: each event has been fanned out when
	// it is acknowledged. Half a megabyte queued past the socket is more
	// than the kernel's buffers will take on a window this small.
	const held = 512 << 10
	for i := 0; p.Stats(t).OutQueueBytes < held; i++ {
		if i == 1000 {
			t.Fatalf("less than %d bytes queued for a subscriber that does not read after %d events of %d bytes", held, i, len(body))
		}
		pub.MustPublish(key.Note(fmt.Sprintf("%s %d", body, i)))
	}
}
