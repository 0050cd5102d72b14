package main

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestTimerSlackChoice(t *testing.T) {
	// runtime.timer_slack and store.background_pause share the rule:
	// each setting, with its own default, on one processor and several.
	for _, setting := range []struct {
		name    string
		auto    time.Duration
		resolve func(set time.Duration, procs int) time.Duration
	}{
		{"timer_slack", autoTimerSlack, func(set time.Duration, procs int) time.Duration {
			return timerSlack(config.Runtime{TimerSlack: set}, procs)
		}},
		{"background_pause", autoBackgroundPause, func(set time.Duration, procs int) time.Duration {
			return backgroundPause(config.Store{BackgroundPause: set}, procs)
		}},
	} {
		for _, c := range []struct {
			set   time.Duration
			procs int
			want  time.Duration
		}{
			{0, 1, setting.auto}, // the default on one processor
			{0, 2, 0},            // several: none (timer slack: inherited)
			{-1, 1, 0},           // negative: none
			{3 * time.Millisecond, 1, 3 * time.Millisecond},
			{3 * time.Millisecond, 8, 3 * time.Millisecond},
		} {
			if got := setting.resolve(c.set, c.procs); got != c.want {
				t.Errorf("%s %v on %d processors: %v, want %v", setting.name, c.set, c.procs, got, c.want)
			}
		}
	}

	// The processors counted are those applyRuntime will set.
	t.Setenv("GOMAXPROCS", "")
	if n := servingProcs(config.Runtime{GOMAXPROCS: 1}); n != 1 {
		t.Errorf("runtime.gomaxprocs 1: %d processors", n)
	}
	// The environment variable wins over the setting, as in
	// applyRuntime: Go applied it at start.
	t.Setenv("GOMAXPROCS", "3")
	if n, want := servingProcs(config.Runtime{GOMAXPROCS: 1}), runtime.GOMAXPROCS(0); n != want {
		t.Errorf("GOMAXPROCS set: %d processors, want Go's %d", n, want)
	}
}

// TestExecMarker: the marker of an executed process is read once (and
// removed, so plugins do not inherit it); its start time is used only if
// it is one of the last minute.
func TestExecMarker(t *testing.T) {
	t.Setenv(timerSlackExecEnv, "")
	if start, again := execMarker(); again || !start.IsZero() {
		t.Errorf("no marker: %v %v", start, again)
	}
	then := time.Now().Add(-time.Second)
	t.Setenv(timerSlackExecEnv, strconv.FormatInt(then.UnixNano(), 10))
	if start, again := execMarker(); !again || !start.Equal(time.Unix(0, then.UnixNano())) {
		t.Errorf("marker of %v: %v %v", then, start, again)
	}
	if v, ok := os.LookupEnv(timerSlackExecEnv); ok {
		t.Errorf("marker left in the environment: %q", v)
	}
	for _, v := range []string{"1", "x", strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)} {
		t.Setenv(timerSlackExecEnv, v)
		if start, again := execMarker(); !again || !start.IsZero() {
			t.Errorf("marker %q: %v %v, want no start time", v, start, again)
		}
	}
}

// TestServeTimerSlack runs petrel serve and reads the timer slack of its
// threads. With GOMAXPROCS 1 it takes the default (autoTimerSlack);
// a configured value wins whatever the processors; a negative one, or a
// process that was already executed again (its marker set), keeps what
// it inherited. Run as root, petrel sets every thread's slack in place;
// without CAP_SYS_NICE (setpriv drops it) it executes itself again, in
// the same process, which then serves.
func TestServeTimerSlack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	bin := petrelBin(t)
	inherited, err := threadSlack() // what a child of this process inherits
	if err != nil {
		t.Fatal(err)
	}
	if inherited == autoTimerSlack || inherited == 300*time.Microsecond {
		t.Skipf("this test runs with a timer slack of %v, which the cases use", inherited)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		setpriv = ""
	}
	for _, c := range []struct {
		name   string
		env    []string
		noNice bool // without CAP_SYS_NICE
		want   time.Duration
		log    string // in the log
	}{
		{"default, one processor", []string{"GOMAXPROCS=1"}, false, autoTimerSlack, "timer_slack=1ms timer_slack_set=" + slackThreads},
		{"default, one processor, no CAP_SYS_NICE", []string{"GOMAXPROCS=1"}, true, autoTimerSlack, "timer_slack=1ms timer_slack_set=" + slackExec},
		{"configured, three", []string{"GOMAXPROCS=3", "PETREL_RUNTIME_TIMER_SLACK=300us"}, false, 300 * time.Microsecond, "timer_slack=300µs timer_slack_set=" + slackThreads},
		{"negative", []string{"GOMAXPROCS=1", "PETREL_RUNTIME_TIMER_SLACK=-1ns"}, false, inherited, "timer_slack=" + inherited.String() + " "},
		{"default, three", []string{"GOMAXPROCS=3"}, false, inherited, "timer_slack=" + inherited.String() + " "},
		{"executed already", []string{"GOMAXPROCS=1", timerSlackExecEnv + "=1"}, false, inherited, "timer slack left as inherited"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, args := bin, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0"}
			if c.noNice {
				if os.Geteuid() != 0 || setpriv == "" {
					t.Skip("needs root and setpriv to run petrel without CAP_SYS_NICE")
				}
				// setpriv runs petrel (exec, same process) with
				// CAP_SYS_NICE out of its bounding set.
				b, args = setpriv, append([]string{"--bounding-set", "-sys_nice", bin}, args...)
			}
			p := startProc(t, b, c.env, args...)
			got, err := threadsSlack(p.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != c.want {
				t.Errorf("the threads' timer slack %v, want %v for all\n%s", got, c.want, p.Log())
			}
			if !strings.Contains(p.Log(), c.log) {
				t.Errorf("log without %q:\n%s", c.log, p.Log())
			}
			// The process serves: an event is stored and read back.
			cl := relaytest.Dial(t, p.URL)
			defer cl.Close()
			ev := relaytest.NewKey("timer-slack").Note(c.name)
			cl.MustPublish(ev)
			if got := cl.Req("r", `{"ids":["`+ev.ID.String()+`"]}`); len(got) != 1 || got[0].ID != ev.ID {
				t.Errorf("REQ of the published event: %d events", len(got))
			}
		})
	}
}

// threadsSlack returns the distinct timer slacks of the threads of
// process pid, smallest first.
func threadsSlack(pid int) ([]time.Duration, error) {
	var out []time.Duration
	err := eachThreadSlack(strconv.Itoa(pid), func(_ string, slack time.Duration) error {
		if !slices.Contains(out, slack) {
			out = append(out, slack)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// TestServeBackgroundPause runs petrel serve and reads the pause of its
// pebble flushes and compactions (store.background_pause) off the
// "petrel listening" line: the default is autoBackgroundPause with
// GOMAXPROCS 1 and none with several; a configured value wins whatever
// the processors; a negative one turns it off. The pause itself is
// internal/store/pebble's TestBackgroundPause.
func TestServeBackgroundPause(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	bin := petrelBin(t)
	for _, c := range []struct {
		name string
		env  []string
		want string // "": no background_pause in the line
	}{
		{"default, one processor", []string{"GOMAXPROCS=1"}, "background_pause=200µs"},
		{"default, three", []string{"GOMAXPROCS=3"}, ""},
		{"negative", []string{"GOMAXPROCS=1", "PETREL_STORE_BACKGROUND_PAUSE=-1ns"}, ""},
		{"configured, three", []string{"GOMAXPROCS=3", "PETREL_STORE_BACKGROUND_PAUSE=2ms"}, "background_pause=2ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startProc(t, bin, c.env, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0")
			var line string
			for _, l := range strings.Split(p.Log(), "\n") {
				if strings.Contains(l, "petrel listening") {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no listening line:\n%s", p.Log())
			}
			if c.want == "" && strings.Contains(line, "background_pause") || c.want != "" && !strings.Contains(line, c.want+" ") {
				t.Errorf("listening line %q, want %q", line, c.want)
			}
		})
	}
}
