package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/bench"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// runCmd runs `petrel bench args...` with the exit hook captured and
// returns stdout and the exit code.
func runCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	code := 0
	benchExit = func(c int) { code = c }
	t.Cleanup(func() { benchExit = os.Exit })
	cmd := benchCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench %v: %v (stderr %s)", args, err, errb.String())
	}
	return out.String(), code
}

func TestBenchCommandOK(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	out, code := runCmd(t, "ingest", "--url", rl.URL, "--events", "200", "--quiet", "--timeout", "60s")
	if code != benchExitOK || !strings.HasPrefix(out, "OK ingest: ") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	out, code = runCmd(t, "parallel", "--url", rl.URL, "--events", "200", "--conns", "2", "--json", "--timeout", "60s")
	if code != benchExitOK {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, out)
	}
	if res.Scenario != "parallel" || res.OK.Accepted != 200 || len(res.Failures) != 0 {
		t.Errorf("result %+v", res)
	}
}

// TestBenchProfiles: --cpuprofile and --trace leave a whole profile and
// trace of the client, whether the run passes or fails (a failure exits
// through benchExit, which skips deferred calls).
func TestBenchProfiles(t *testing.T) {
	check := func(name, prof, tr string) {
		t.Helper()
		b, err := os.ReadFile(prof)
		if err != nil || len(b) < 64 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: CPU profile %d bytes (%v), want a gzipped profile", name, len(b), err)
		}
		b, err = os.ReadFile(tr)
		if err != nil || len(b) < 1024 || !bytes.HasPrefix(b, []byte("go 1.")) {
			t.Errorf("%s: trace %d bytes (%v), want a runtime trace", name, len(b), err)
		}
	}
	dir := t.TempDir()
	rl := relaytest.Start(t, relaytest.Options{})
	out, code := runCmd(t, "ingest", "--url", rl.URL, "--events", "200", "--quiet", "--timeout", "60s",
		"--cpuprofile", dir+"/ok.prof", "--trace", dir+"/ok.trace")
	if code != benchExitOK {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	check("passing run", dir+"/ok.prof", dir+"/ok.trace")

	slow := relaytest.Start(t, relaytest.Options{Relay: relay.Config{OutQueueFrames: 8}})
	out, code = runCmd(t, "fanout", "--url", slow.URL, "--events", "600", "--subs", "3", "--slow-subs", "1",
		"--slow-read-delay", "2ms", "--quiet", "--timeout", "60s", "--cpuprofile", dir+"/fail.prof", "--trace", dir+"/fail.trace")
	if code != benchExitFailure {
		t.Fatalf("exit %d, want %d; output:\n%s", code, benchExitFailure, out)
	}
	check("failing run", dir+"/fail.prof", dir+"/fail.trace")
}

// TestBenchCommandFailure: lost deliveries make the first line FAIL and
// the exit code 2, in text and JSON mode.
func TestBenchCommandFailure(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{Relay: relay.Config{OutQueueFrames: 8}})
	args := []string{"fanout", "--url", rl.URL, "--events", "600", "--subs", "3", "--slow-subs", "1",
		"--slow-read-delay", "2ms", "--quiet", "--timeout", "60s"}
	out, code := runCmd(t, args...)
	if code != benchExitFailure {
		t.Fatalf("exit %d, want %d; output:\n%s", code, benchExitFailure, out)
	}
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "FAIL fanout: ") || !strings.Contains(first, "deliveries missing") {
		t.Errorf("first line %q", first)
	}
	out, code = runCmd(t, append(args, "--json")...)
	if code != benchExitFailure {
		t.Fatalf("--json: exit %d", code)
	}
	var res struct {
		Failures []string `json:"failures"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Failures) == 0 {
		t.Fatalf("--json failures %v (%v):\n%s", res.Failures, err, out)
	}
}

func TestBenchCommandRefuses(t *testing.T) {
	f := func(args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := runBenchArgs(t, &out, &errb, args...)
		if code != benchExitError {
			t.Errorf("bench %v: exit %d, want %d (stdout %q)", args, code, benchExitError, out.String())
		}
	}
	f("ingest", "--url", "ws://10.9.8.7:7447", "--quiet")
	f("ladder", "--url", "ws://127.0.0.1:1", "--rates", "1000,500", "--quiet")
	f("ladder", "--url", "ws://127.0.0.1:1", "--rates", "1000", "--steps", "3", "--quiet")
	f("ladder", "--url", "ws://127.0.0.1:1", "--rates", "1000,abc", "--quiet")
	// The options' error, told once by the command's name.
	var out, errb bytes.Buffer
	runBenchArgs(t, &out, &errb, "ladder", "--url", "ws://127.0.0.1:1", "--rates", "0", "--quiet")
	if got := errb.String(); got != "petrel bench ladder: invalid options: ladder rates must be positive and increasing: [0]\n" {
		t.Errorf("--rates 0: %q", got)
	}
}

// runBenchArgs runs the command and returns the exit code, counting a
// returned error as exit 1 (as main does).
func runBenchArgs(t *testing.T, out, errb *bytes.Buffer, args ...string) int {
	t.Helper()
	code := 0
	benchExit = func(c int) { code = c }
	t.Cleanup(func() { benchExit = os.Exit })
	cmd := benchCmd()
	cmd.SetOut(out)
	cmd.SetErr(errb)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return benchExitError
	}
	return code
}

func TestBenchRates(t *testing.T) {
	f := func(fl benchFlags, want []float64, ok bool) {
		t.Helper()
		o, err := fl.options()
		if ok != (err == nil) {
			t.Fatalf("%+v: err %v", fl, err)
		}
		if ok && !equalFloats(o.Rates, want) {
			t.Errorf("%+v: rates %v, want %v", fl, o.Rates, want)
		}
	}
	f(benchFlags{}, nil, true)
	f(benchFlags{rates: "1000, 2000,4000"}, []float64{1000, 2000, 4000}, true)
	f(benchFlags{rates: "1000,x"}, nil, false)
	f(benchFlags{start: 500, step: 250, steps: 3}, []float64{500, 750, 1000}, true)
	f(benchFlags{start: 500, steps: 3}, nil, false)
	f(benchFlags{rates: "1", steps: 3, start: 1, step: 1}, nil, false)
	o, _ := (&benchFlags{createdAt: 77, o: bench.Options{Hold: time.Second}}).options()
	if o.CreatedAt != 77 || o.Hold != time.Second {
		t.Errorf("options %+v", o)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
