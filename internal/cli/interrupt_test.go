package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignal: while a stop is under way, the same signal again
// within SignalEcho is the first one echoed; at SignalEcho and past it,
// or another signal at any time, it asks to exit at once.
func TestSecondSignal(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		sig   os.Signal
		after time.Duration
		want  bool
	}{
		{syscall.SIGTERM, 0, false},
		{syscall.SIGTERM, SignalEcho - time.Nanosecond, false},
		{syscall.SIGTERM, SignalEcho, true},
		{syscall.SIGTERM, time.Minute, true},
		{syscall.SIGINT, 0, true},
	} {
		if got := SecondSignal(syscall.SIGTERM, t0, c.sig, t0.Add(c.after)); got != c.want {
			t.Errorf("SIGTERM, then %v %v later: exit now %v, want %v", c.sig, c.after, got, c.want)
		}
	}
}

// interruptChild is the child process of TestInterruptible: a command
// whose stop hangs once its context is cancelled.
const interruptChild = "PETREL_TEST_INTERRUPTIBLE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(interruptChild) == "1" {
		ctx, stop := Interruptible(context.Background())
		defer stop()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("stopping")
		select {} // a stop that never ends
	}
	os.Exit(m.Run())
}

// TestInterruptible: the first signal cancels the context; a command
// whose stop hangs then ends at the second, with status 1 and a line on
// stderr, but not at the same signal echoed at once (as GNU timeout
// sends it): only at one SignalEcho or more after the first. SIGINT
// after SIGTERM ends it at once.
func TestInterruptible(t *testing.T) {
	elapsed := regexp.MustCompile(`petrel: second signal (\S+) after (\S+): exiting now`)
	for _, c := range []struct {
		name  string
		sigs  []syscall.Signal // sent one after another once the first is taken
		pause bool             // wait past SignalEcho before the last
		last  string
	}{
		{"echoed, then again later", []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}, true, "terminated"},
		{"another at once", []syscall.Signal{syscall.SIGINT}, false, "interrupt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), interruptChild+"=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(out)
			expect := func(want string) {
				t.Helper()
				if !lines.Scan() || lines.Text() != want {
					t.Fatalf("child said %q, want %q (stderr %q)", lines.Text(), want, stderr.String())
				}
			}
			expect("ready")
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			expect("stopping")
			for i, s := range c.sigs {
				if c.pause && i == len(c.sigs)-1 {
					time.Sleep(SignalEcho + 50*time.Millisecond)
				}
				if err := cmd.Process.Signal(s); err != nil {
					t.Fatal(err)
				}
			}
			hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
			err = cmd.Wait()
			if !hung.Stop() {
				t.Fatalf("still running 30 s after the second signal (stderr %q)", stderr.String())
			}
			m := elapsed.FindStringSubmatch(stderr.String())
			if cmd.ProcessState.ExitCode() != 1 || m == nil || m[1] != c.last {
				t.Fatalf("child ended with %v, stderr %q: want status 1 and the second signal %q", err, stderr.String(), c.last)
			}
			if after, err := time.ParseDuration(m[2]); err != nil || c.pause && after < SignalEcho {
				t.Fatalf("exited %s after the first signal: an echo within %v ended it", m[2], SignalEcho)
			}
		})
	}
}
