package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// testKey signs test events.
var testKey = nostr.SecretKeyFromSeed([]byte("policy test key"))

func testEvent(content string) *nostr.Event {
	return testEventBy(testKey, 1, content)
}

var eventSeq atomic.Int64

func testEventBy(sk nostr.SecretKey, kind int, content string) *nostr.Event {
	ev := &nostr.Event{Kind: kind, Content: content, Tags: nostr.Tags{}, CreatedAt: 1700000000 + eventSeq.Add(1)}
	nostr.SignEvent(ev, sk)
	return ev
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writePluginScript writes an executable script at path that runs the test
// binary as a plugin in mode, with extra environment assignments.
func writePluginScript(t testing.TB, path, mode string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// GORACE: a race-enabled binary otherwise sleeps 1s when it exits.
	script := "#!/bin/sh\n" + pluginEnv + "=" + mode + " GORACE=atexit_sleep_ms=0 " + strings.Join(env, " ") + " exec " + shellQuote(exe) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// logSink is a slog handler that keeps records for assertions.
type logSink struct {
	mu   sync.Mutex
	recs []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	s.mu.Lock()
	s.recs = append(s.recs, b.String())
	s.mu.Unlock()
	return nil
}
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *logSink) WithGroup(string) slog.Handler      { return s }

func (s *logSink) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		if strings.Contains(r, sub) {
			return true
		}
	}
	return false
}

type testPlugin struct {
	*Plugin
	path string
	logs *logSink
}

// startTestPlugin starts a plugin running the test binary in mode, with
// short internal periods. cfg's Plugin is set here.
func startTestPlugin(t *testing.T, cfg Config, mode string, env ...string) *testPlugin {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugin")
	writePluginScript(t, path, mode, env...)
	cfg.Plugin = path
	if cfg.PluginTimeout == 0 {
		cfg.PluginTimeout = 10 * time.Second // generous: CI machines are slow under -race
	}
	cfg = cfg.Normalize()
	logs := &logSink{}
	p, err := newPlugin(cfg, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	p.pollEvery = 20 * time.Millisecond
	p.minBackoff = 10 * time.Millisecond
	p.maxBackoff = 100 * time.Millisecond
	p.drainGrace = 200 * time.Millisecond
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &testPlugin{Plugin: p, path: path, logs: logs}
}

// call is one submitted request: its decisions arrive on ch; count is the
// number of times done ran.
type call struct {
	ch    chan Decision
	count atomic.Int32
}

func (p *testPlugin) submit(t *testing.T, ev *nostr.Event, meta Meta) *call {
	t.Helper()
	c := &call{ch: make(chan Decision, 4)}
	if rej := p.Check(ev, meta, func(d Decision) {
		c.count.Add(1)
		c.ch <- d
	}); rej != nil {
		t.Fatalf("Check refused: %v", rej)
	}
	return c
}

// wait returns the call's decision; a plugin test that gets none in 20s
// is broken (every path has a timeout far below that).
func (c *call) wait(t *testing.T) Decision {
	t.Helper()
	select {
	case d := <-c.ch:
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no decision")
		return Decision{}
	}
}

func (p *testPlugin) decide(t *testing.T, ev *nostr.Event) Decision {
	t.Helper()
	return p.submit(t, ev, MetaFromIP(netip.MustParseAddr("203.0.113.9"), nostr.PubKey{})).wait(t)
}

func TestPluginAccept(t *testing.T) {
	p := startTestPlugin(t, Config{}, "accept")
	for i := 0; i < 3; i++ {
		if d := p.decide(t, testEvent("hello")); d.Action != Accept {
			t.Fatalf("decision %+v, want accept", d)
		}
	}
	st := p.Stats()
	if st.Requests != 3 || st.Accepted != 3 || st.Inflight != 0 || st.Restarts != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPluginDecisions(t *testing.T) {
	p := startTestPlugin(t, Config{}, "content")
	f := func(content string, action Action, okMsg string) {
		t.Helper()
		d := p.decide(t, testEvent(content))
		if d.Action != action {
			t.Fatalf("%q: action %v, want %v (msg %q)", content, d.Action, action, d.Msg)
		}
		got := ""
		if rej := d.Rejection(); rej != nil {
			got = rej.Error()
		}
		if got != okMsg {
			t.Fatalf("%q: rejection %q, want %q", content, got, okMsg)
		}
	}
	f("hello", Accept, "")
	f("buy spam now", Reject, "blocked: no spam")
	f("shadow me", ShadowReject, "")
	f("noprefix", Reject, "blocked: nope")
	f("bad-action", Reject, msgMalformed)
	f("hello again", Accept, "") // the process survived the bad answer
	st := p.Stats()
	if st.Accepted != 2 || st.Rejected != 2 || st.ShadowRejected != 1 || st.Failed != 1 || st.Restarts != 0 {
		t.Fatalf("stats %+v", st)
	}
	if !p.logs.contains("malformed answer") {
		t.Fatal("bad action not logged")
	}
}

func TestPluginRequestFields(t *testing.T) {
	p := startTestPlugin(t, Config{}, "content")
	authed := nostr.SecretKeyFromSeed([]byte("authed")).PubKey()
	f := func(ev *nostr.Event, meta Meta, want string) {
		t.Helper()
		d := p.submit(t, ev, meta).wait(t)
		if d.Action != Reject || d.Msg != "blocked: "+want {
			t.Fatalf("got %+v, want reject %q", d, want)
		}
	}
	ev := testEventBy(testKey, 7, "echo")
	at := time.Unix(1712345678, 0)
	meta := MetaFromIP(netip.MustParseAddr("2001:db8::1"), authed)
	meta.ReceivedAt = at
	f(ev, meta, "new|IP6|2001:db8::1|"+authed.Hex()+"|1712345678|7|echo")
	meta = MetaFromIP(netip.MustParseAddr("::ffff:192.0.2.1"), nostr.PubKey{})
	meta.ReceivedAt = at
	f(ev, meta, "new|IP4|192.0.2.1||1712345678|7|echo")
	f(ev, Meta{ReceivedAt: at, SourceType: SourceStream, SourceInfo: "wss://other.example"},
		"new|Stream|wss://other.example||1712345678|7|echo")

	// An event that arrived pretty-printed (newlines between tokens) is
	// sent on one line.
	pretty, err := json.MarshalIndent(json.RawMessage(ev.Raw), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	pev, err := nostr.ParseEvent(pretty, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pev.Raw), "\n") {
		t.Fatal("test event is not multi-line")
	}
	f(pev, meta, "new|IP4|192.0.2.1||1712345678|7|echo")
}

func TestPluginManyInFlight(t *testing.T) {
	p := startTestPlugin(t, Config{}, "content")
	const workers, per = 8, 60
	evs := make([]*nostr.Event, workers*per)
	for i := range evs {
		content := fmt.Sprintf("note %d", i)
		if i%3 == 0 {
			content = fmt.Sprintf("spam %d", i)
		}
		evs[i] = testEvent(content)
	}
	calls := make([]*call, len(evs))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w * per; i < (w+1)*per; i++ {
				calls[i] = p.submit(t, evs[i], Meta{})
			}
		}(w)
	}
	wg.Wait()
	for i, c := range calls {
		d := c.wait(t)
		want := Accept
		if i%3 == 0 {
			want = Reject
		}
		if d.Action != want {
			t.Fatalf("event %d: %+v, want %v", i, d, want)
		}
	}
	p.Close()
	for i, c := range calls {
		if n := c.count.Load(); n != 1 {
			t.Fatalf("event %d: done called %d times", i, n)
		}
	}
}

func TestPluginOutOfOrderAnswers(t *testing.T) {
	p := startTestPlugin(t, Config{}, "reverse")
	for round := 0; round < 3; round++ {
		a := p.submit(t, testEvent("spam first"), Meta{})
		b := p.submit(t, testEvent("fine second"), Meta{})
		if d := a.wait(t); d.Action != Reject || d.Msg != "blocked: no spam" {
			t.Fatalf("first: %+v", d)
		}
		if d := b.wait(t); d.Action != Accept {
			t.Fatalf("second: %+v", d)
		}
	}
}

func TestPluginSameEventTwice(t *testing.T) {
	p := startTestPlugin(t, Config{}, "reverse")
	ev := testEvent("same")
	a, b := p.submit(t, ev, Meta{}), p.submit(t, ev, Meta{})
	if da, db := a.wait(t), b.wait(t); da.Action != Accept || db.Action != Accept {
		t.Fatalf("decisions %+v %+v", da, db)
	}
}

func TestPluginTimeout(t *testing.T) {
	p := startTestPlugin(t, Config{PluginTimeout: 150 * time.Millisecond}, "hang")
	d := p.decide(t, testEvent("anyone there?"))
	if d.Action != Reject || d.Msg != msgTimeout {
		t.Fatalf("decision %+v", d)
	}
	if rej := d.Rejection(); rej.Prefix != nostr.PrefixError {
		t.Fatalf("rejection %v", rej)
	}
	// The process answered nothing for a whole timeout: it is restarted.
	waitFor(t, "a restart of the stuck plugin", func() bool { return p.Stats().Restarts >= 1 })
	st := p.Stats()
	if st.Timeouts != 1 || st.Inflight != 0 {
		t.Fatalf("stats %+v", st)
	}
	if !p.logs.contains("answered nothing within the timeout") {
		t.Fatal("stuck plugin not logged")
	}
}

// TestPluginStuck: a process is stuck when a request written to it times
// out and it has written nothing since that request, nor for a whole
// timeout.
func TestPluginStuck(t *testing.T) {
	p := &Plugin{timeout: 100}
	f := func(lastAnswer, sentAt, now int64, want bool) {
		t.Helper()
		if got := p.stuck(lastAnswer, sentAt, now); got != want {
			t.Fatalf("stuck(last %d, sent %d, now %d) = %v, want %v", lastAnswer, sentAt, now, got, want)
		}
	}
	f(0, 10, 110, true)   // silent since before the request, for a whole timeout
	f(0, 10, 100, true)   // exactly a timeout
	f(1, 10, 100, false)  // one nanosecond short of a timeout: a young process
	f(0, 95, 99, false)   // a backlog written at start, timing out at once
	f(10, 10, 500, false) // wrote a line at the moment the request went out
	f(50, 10, 500, false) // answered something after the request was written
}

// TestPluginBacklogNotStuck: a process handed a request that times out
// before it could answer is not killed as stuck (it has not had a whole
// timeout), and goes on answering.
func TestPluginBacklogNotStuck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plugin")
	writePluginScript(t, path, "content")
	logs := &logSink{}
	p, err := newPlugin(Config{Plugin: path, PluginTimeout: 10 * time.Second}.Normalize(), slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	p.drainGrace = 200 * time.Millisecond
	tp := &testPlugin{Plugin: p, path: path, logs: logs}
	// start(), in steps: the request is written to the process before the
	// reaper runs, and is then made to time out at once. The process spawn
	// returns is current already: its writer sends what was waiting with
	// no other step (a writer that ran before its process was made current
	// used to end at once, and the request waited forever).
	old := tp.submit(t, testEvent("silent"), Meta{})
	pr, err := p.spawn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	waitFor(t, "the request to be written", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.head != nil && p.head.gen == pr.gen
	})
	p.mu.Lock()
	p.head.deadline = p.since()
	p.mu.Unlock()
	p.wg.Add(2)
	go p.supervise(pr)
	go p.reap()
	if d := old.wait(t); d.Msg != msgTimeout {
		t.Fatalf("backlog decision %+v", d)
	}
	if d := tp.decide(t, testEvent("after")); d.Action != Accept {
		t.Fatalf("after the timeout: %+v", d)
	}
	p.Close()
	if st := p.Stats(); st.Restarts != 0 || st.Timeouts != 1 || st.Failed != 0 || st.Accepted != 1 {
		t.Fatalf("stats %+v", st)
	}
	if logs.contains("answered nothing within the timeout") {
		t.Fatal("a young process was killed as stuck")
	}
}

func TestPluginCrashRestart(t *testing.T) {
	p := startTestPlugin(t, Config{}, "crash", pluginEnv+"_N=2")
	for i := 0; i < 2; i++ {
		if d := p.decide(t, testEvent("ok")); d.Action != Accept {
			t.Fatalf("event %d: %+v", i, d)
		}
	}
	// The third request kills the process while it is in flight.
	d := p.decide(t, testEvent("boom"))
	if d.Action != Reject || d.Msg != msgExited {
		t.Fatalf("in-flight decision %+v, want %q", d, msgExited)
	}
	// The next one is answered by a new process.
	if d := p.decide(t, testEvent("after")); d.Action != Accept {
		t.Fatalf("after restart: %+v", d)
	}
	st := p.Stats()
	if st.Restarts != 1 || st.Failed != 1 || st.Accepted != 3 {
		t.Fatalf("stats %+v", st)
	}
	if !p.logs.contains("write policy plugin exited") {
		t.Fatal("exit not logged")
	}
}

func TestPluginGarbage(t *testing.T) {
	p := startTestPlugin(t, Config{}, "garbage")
	for i := 0; i < 3; i++ {
		d := p.decide(t, testEvent("hi"))
		if d.Action != Reject || d.Msg != msgMalformed {
			t.Fatalf("decision %+v", d)
		}
	}
	if !p.logs.contains("this is not json") {
		t.Fatal("garbage line not logged")
	}
	if st := p.Stats(); st.Failed != 3 || st.Restarts != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPluginStderrLogged(t *testing.T) {
	p := startTestPlugin(t, Config{}, "stderr")
	ev := testEvent("hi")
	if d := p.decide(t, ev); d.Action != Accept {
		t.Fatalf("decision %+v", d)
	}
	waitFor(t, "the stderr line in the log", func() bool { return p.logs.contains("plugin saw " + ev.ID.Hex()) })
}

func TestPluginReload(t *testing.T) {
	p := startTestPlugin(t, Config{}, "accept")
	if d := p.decide(t, testEvent("before")); d.Action != Accept {
		t.Fatalf("before: %+v", d)
	}
	writePluginScript(t, p.path, "rejectall")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(p.path, future, future); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new plugin version to answer", func() bool {
		d := p.decide(t, testEvent("after"))
		if d.Action == Reject && d.Msg != "blocked: everything is rejected" {
			t.Fatalf("unexpected decision during reload: %+v", d)
		}
		return d.Action == Reject
	})
	if st := p.Stats(); st.Restarts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPluginReloadBadFileKeepsOld(t *testing.T) {
	p := startTestPlugin(t, Config{}, "accept")
	// A new version that cannot be executed: the old process stays.
	if err := os.Chmod(p.path, 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(p.path, future, future)
	waitFor(t, "the failed reload to be logged", func() bool { return p.logs.contains("keeping the old one") })
	if d := p.decide(t, testEvent("still here")); d.Action != Accept {
		t.Fatalf("decision %+v", d)
	}
	if st := p.Stats(); st.Restarts != 0 {
		t.Fatalf("stats %+v", st)
	}
	if runtime.GOOS != "linux" {
		return // ctime is watched on Linux only
	}
	// Fixing the file (chmod changes its ctime) starts the new version.
	if err := os.Chmod(p.path, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fixed file to be started", func() bool { return p.Stats().Restarts == 1 })
}

func TestPluginMaxInflight(t *testing.T) {
	p := startTestPlugin(t, Config{PluginMaxInflight: 3, PluginTimeout: time.Minute}, "hang")
	var calls []*call
	for i := 0; i < 3; i++ {
		calls = append(calls, p.submit(t, testEvent("wait"), Meta{}))
	}
	rej := p.Check(testEvent("one too many"), Meta{}, func(Decision) { t.Error("done called for a refused event") })
	if rej == nil || rej.Prefix != nostr.PrefixRateLimited {
		t.Fatalf("rejection %v, want rate-limited", rej)
	}
	if st := p.Stats(); st.Refused != 1 || st.Inflight != 3 {
		t.Fatalf("stats %+v", st)
	}
	// Close: the plugin exits on EOF without answering; the waiting events
	// are rejected.
	p.Close()
	for _, c := range calls {
		if d := c.wait(t); d.Action != Reject || d.Msg != msgShutdown {
			t.Fatalf("decision %+v", d)
		}
		if c.count.Load() != 1 {
			t.Fatal("done not called exactly once")
		}
	}
	if rej := p.Check(testEvent("late"), Meta{}, func(Decision) {}); rej == nil || rej.Prefix != nostr.PrefixError {
		t.Fatalf("Check after Close: %v", rej)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPluginCloseAnswersInFlight(t *testing.T) {
	// reverse mode holds a lone request until its stdin closes: Close
	// lets it answer before the process is gone.
	p := startTestPlugin(t, Config{}, "reverse")
	a := p.submit(t, testEvent("spam"), Meta{})
	p.Close()
	if d := a.wait(t); d.Action != Reject || d.Msg != "blocked: no spam" {
		t.Fatalf("decision %+v", d)
	}
}

func TestPluginShellCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Plugin: pluginEnv + "=content GORACE=atexit_sleep_ms=0 exec " + shellQuote(exe)}.Normalize()
	p, err := newPlugin(cfg, slog.New(&logSink{}))
	if err != nil {
		t.Fatal(err)
	}
	if p.watch {
		t.Fatal("a shell command must not be watched")
	}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	tp := &testPlugin{Plugin: p}
	t.Cleanup(func() { p.Close() })
	if d := tp.decide(t, testEvent("spam")); d.Action != Reject {
		t.Fatalf("decision %+v", d)
	}
}

func TestStartPluginErrors(t *testing.T) {
	dir := t.TempDir()
	f := func(plugin string) {
		t.Helper()
		p, err := StartPlugin(Config{Plugin: plugin}, slog.New(&logSink{}))
		if err == nil {
			p.Close()
			t.Fatalf("StartPlugin(%q) succeeded", plugin)
		}
	}
	f("")
	f(filepath.Join(dir, "missing"))
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
	f(plain)
}

// waitFor polls cond until it holds, failing the test after 20s (far
// beyond any period involved: a bound on a hang, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkPluginRoundTrip measures events per second through an accepting
// plugin process (the test binary), with window events in flight.
func BenchmarkPluginRoundTrip(b *testing.B) {
	for _, window := range []int{1, 256} {
		b.Run(fmt.Sprintf("inflight=%d", window), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "plugin")
			writePluginScript(b, path, "accept")
			p, err := StartPlugin(Config{Plugin: path}, slog.New(&logSink{}))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			evs := make([]*nostr.Event, 1024)
			for i := range evs {
				evs[i] = testEvent(fmt.Sprintf("bench %d", i))
			}
			sem := make(chan struct{}, window)
			var wg sync.WaitGroup
			meta := MetaFromIP(netip.MustParseAddr("192.0.2.1"), nostr.PubKey{})
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sem <- struct{}{}
				wg.Add(1)
				if rej := p.Check(evs[i%len(evs)], meta, func(d Decision) {
					if d.Action != Accept {
						b.Error("not accepted:", d.Msg)
					}
					<-sem
					wg.Done()
				}); rej != nil {
					b.Fatal(rej)
				}
			}
			wg.Wait()
		})
	}
}
