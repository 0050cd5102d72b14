package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/petrel-relay/petrel/internal/config"
)

// autoTimerSlack is the timer slack petrel serve gives itself by default
// when it runs Go code on one processor (runtime.timer_slack).
const autoTimerSlack = time.Millisecond

// timerSlackExecEnv marks the process petrel serve executed again to give
// it a timer slack, so that it never does so twice; its value is the time
// the first one started (unix nanoseconds), so that the start-up time
// logged counts both. (Not PETREL_...: those are settings, and an
// unknown one is refused.)
const timerSlackExecEnv = "_PETREL_TIMER_SLACK_EXEC"

// execMarker reads timerSlackExecEnv and removes it from the
// environment (not passed on to plugins): whether this process is one
// petrel serve executed again for the slack, and when the first one
// started (zero if the value is not a time of the last minute).
func execMarker() (start time.Time, again bool) {
	v := os.Getenv(timerSlackExecEnv)
	os.Unsetenv(timerSlackExecEnv)
	if v == "" {
		return time.Time{}, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if t := time.Unix(0, n); time.Since(t) >= 0 && time.Since(t) < time.Minute {
			return t, true
		}
	}
	return time.Time{}, true
}

// timerSlack returns the timer slack petrel serve should have under c
// when Go code runs on procs processors; 0: leave the inherited one.
func timerSlack(c config.Runtime, procs int) time.Duration {
	return oneProcessorDefault(c.TimerSlack, procs, autoTimerSlack)
}

// oneProcessorDefault resolves a duration setting whose default applies
// only when Go code runs on one processor (runtime.timer_slack,
// store.background_pause): negative is none (0), positive is itself, 0
// is auto on one processor and none on several.
func oneProcessorDefault(set time.Duration, procs int, auto time.Duration) time.Duration {
	switch {
	case set < 0:
		return 0
	case set > 0:
		return set
	case procs == 1:
		return auto
	}
	return 0
}

// servingProcs is the number of processors Go code will run on once
// applyRuntime has applied c (the GOMAXPROCS environment variable wins
// over runtime.gomaxprocs, as there).
func servingProcs(c config.Runtime) int {
	if n := configuredProcs(c); n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// threadSlack returns the timer slack of the calling thread.
func threadSlack() (time.Duration, error) {
	n, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	return time.Duration(n), err
}

// How applyTimerSlack set the slack.
const (
	slackInherited = "inherited" // the process had it already
	slackThreads   = "threads"   // each thread's, in place
	slackExec      = "exec"      // petrel was executed again with it
)

// applyTimerSlack gives every thread of the process the timer slack d,
// and says how (slackInherited, slackThreads; slackExec in the executed
// process). A thread inherits its slack from the thread that starts it,
// and the Go runtime starts its first threads (sysmon among them) before
// any of petrel's code runs. So it sets every thread's through
// /proc/TID/timerslack_ns, which for threads other than the caller's
// needs CAP_SYS_NICE; without it, it sets the calling thread's and
// executes the same binary again from that thread, with the same
// arguments and environment (and the same process id): the kernel keeps
// the slack across exec, and every thread of the new image descends
// from that one. It does nothing when the slack is already d (the
// executed process, or one its service manager started with it), and
// returns an error, without executing, if this process is the executed
// one and does not have it. It returns only when it did not execute.
// start is when this process started, again whether it is one this
// function executed (execMarker).
func applyTimerSlack(d time.Duration, start time.Time, again bool) (string, error) {
	cur, err := threadSlack()
	if err != nil {
		return "", fmt.Errorf("reading the timer slack: %w", err)
	}
	switch {
	case cur == d && again:
		return slackExec, nil
	case cur == d:
		return slackInherited, nil
	case again:
		return "", fmt.Errorf("executed again with a timer slack of %v, the thread has %v", d, cur)
	}
	err = setThreadsSlack(d)
	if err == nil {
		return slackThreads, nil
	}
	if !errors.Is(err, os.ErrPermission) {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return "", fmt.Errorf("setting the timer slack: %w", err)
	}
	err = syscall.Exec(exe, os.Args, append(os.Environ(), timerSlackExecEnv+"="+strconv.FormatInt(start.UnixNano(), 10)))
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(cur.Nanoseconds()), 0, 0, 0)
	return "", fmt.Errorf("executing %s again: %w", exe, err)
}

// setThreadsSlack sets the timer slack of every thread of the process to
// d (/proc/TID/timerslack_ns). A thread started meanwhile inherits its
// starter's slack, old or new, and one being started while a pass reads
// the list shows up only after it, so it goes over the threads again
// until two passes a millisecond apart find nothing to change (one clean
// pass let a thread keep the old slack, seen once under heavy load).
// Threads other than the caller's need CAP_SYS_NICE: without it the
// error wraps os.ErrPermission.
func setThreadsSlack(d time.Duration) error {
	want := strconv.FormatInt(d.Nanoseconds(), 10)
	clean := 0
	for range 10 {
		changed := 0
		err := eachThreadSlack("self", func(tid string, slack time.Duration) error {
			if slack == d {
				return nil
			}
			if err := os.WriteFile("/proc/"+tid+"/timerslack_ns", []byte(want), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			changed++
			return nil
		})
		if err != nil {
			return err
		}
		if changed > 0 {
			clean = 0
			continue
		}
		if clean++; clean == 2 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return errors.New("setting the timer slack: threads kept starting with another")
}

// eachThreadSlack calls fn with the timer slack of every thread of
// process pid ("self": this one), skipping threads that exit meanwhile;
// it stops at fn's first error. Another process's needs the right to
// trace it.
func eachThreadSlack(pid string, fn func(tid string, slack time.Duration) error) error {
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + t.Name() + "/timerslack_ns")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return fmt.Errorf("thread %s: timer slack %q", t.Name(), b)
		}
		if err := fn(t.Name(), time.Duration(n)); err != nil {
			return err
		}
	}
	return nil
}
