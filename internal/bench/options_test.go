package bench

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckTarget(t *testing.T) {
	f := func(url string, allowRemote bool, wantErr error) {
		t.Helper()
		_, err := CheckTarget(url, allowRemote)
		if !errors.Is(err, wantErr) {
			t.Errorf("CheckTarget(%q, %v) = %v, want %v", url, allowRemote, err, wantErr)
		}
	}
	f("ws://127.0.0.1:7447", false, nil)
	f("ws://127.3.4.5:7447/path", false, nil)
	f("wss://[::1]:7447", false, nil)
	f("ws://localhost:7447", false, nil)
	f("ws://10.0.0.1:7447", false, ErrRemote)
	f("ws://192.168.1.1", false, ErrRemote)
	f("ws://8.8.8.8", false, ErrRemote)
	f("ws://8.8.8.8", true, nil)
	f("http://127.0.0.1:7447", false, ErrOptions)
	f("ws://", false, ErrOptions)
	f("::", false, ErrOptions)
}

func TestNormalize(t *testing.T) {
	f := func(scenario string, in Options, check func(o Options) bool) {
		t.Helper()
		if o := in.Normalize(scenario); !check(o) {
			t.Errorf("Normalize(%s, %+v) = %+v", scenario, in, o)
		}
	}
	f(ScenarioIngest, Options{}, func(o Options) bool {
		return o.Events == 10000 && o.Window == 64 && o.Authors == 100 && o.Timeout == 120*time.Second
	})
	f(ScenarioFanout, Options{}, func(o Options) bool { return o.Events == 1000 && o.Subs == 100 && o.Pubs == 1 })
	f(ScenarioParallel, Options{}, func(o Options) bool { return o.Conns == 8 })
	f(ScenarioConns, Options{}, func(o Options) bool { return o.Conns == 1000 && o.PerIP == 100 && o.PerProcess > 0 })
	f(ScenarioReq, Options{}, func(o Options) bool { return o.Conns == 1 && o.Fill == 10000 && o.Limit == 1000 && o.Requests == 200 })
	f(ScenarioReq, Options{Fill: -1}, func(o Options) bool { return o.Fill == 0 })
	f(ScenarioLadder, Options{}, func(o Options) bool {
		return len(o.Rates) == 5 && o.Hold == 5*time.Second && o.MaxP99 == 15*time.Millisecond && o.MaxErrorRate == 0.001 &&
			o.Timeout == 60*time.Second+5*(5*time.Second+drainStall)
	})
	// A ladder's default timeout covers its steps: 10 steps of 10 s.
	f(ScenarioLadder, Options{Rates: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Hold: 10 * time.Second}, func(o Options) bool {
		return o.Timeout == 260*time.Second
	})
	f(ScenarioLadder, Options{Timeout: time.Second}, func(o Options) bool { return o.Timeout == time.Second })
	f(ScenarioIngest, Options{Events: 5, Window: 2}, func(o Options) bool { return o.Events == 5 && o.Window == 2 })
}

func TestSourceIP(t *testing.T) {
	f := func(i, perIP int, want string) {
		t.Helper()
		got := sourceIP(i, perIP)
		if (got == nil) != (want == "") || (got != nil && got.String() != want) {
			t.Errorf("sourceIP(%d, %d) = %v, want %q", i, perIP, got, want)
		}
	}
	f(0, 100, "127.0.0.2")
	f(99, 100, "127.0.0.2")
	f(100, 100, "127.0.0.3")
	f(253*100, 100, "127.0.0.255")
	f(254*100, 100, "127.0.1.0")
	f(70000, 1, "127.1.17.114")
	f(5, 0, "")
	f(5, -1, "")
}

func TestSplitLimit(t *testing.T) {
	f := func(limit, k int, want string) {
		t.Helper()
		b, _ := json.Marshal(splitLimit(limit, k))
		if string(b) != want {
			t.Errorf("splitLimit(%d, %d) = %s, want %s", limit, k, b, want)
		}
	}
	f(1000, 1, "[1000]")
	f(1000, 2, "[500,500]")
	f(1001, 3, "[334,334,333]")
	f(2, 3, "[1,1,0]")
}

func TestResultReport(t *testing.T) {
	r := &Result{Scenario: ScenarioFanout, Failures: []string{}, Rates: map[string]float64{"deliveries": 12345}}
	if h := r.Headline(); !strings.HasPrefix(h, "OK fanout: ") || !strings.Contains(h, "12,345 deliveries/s") {
		t.Errorf("headline %q", h)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"failures":[]`) {
		t.Errorf("JSON without an empty failures array: %s", b)
	}
	r.Fail("%d of %d deliveries missing", 3, 10)
	r.Fail("second")
	var sb strings.Builder
	if err := r.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(sb.String(), "\n")
	if first != "FAIL fanout: 3 of 10 deliveries missing; second" {
		t.Errorf("first line %q", first)
	}
}

func TestHuman(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		if got := human(v); got != want {
			t.Errorf("human(%v) = %q, want %q", v, got, want)
		}
	}
	f(5.25, "5.2")
	f(999, "999")
	f(1000, "1,000")
	f(1234567.8, "1,234,568")
}

// TestTextOption: --text takes vocabulary or natural, nothing else.
func TestTextOption(t *testing.T) {
	for _, text := range []string{"", TextVocabulary, TextNatural} {
		r, err := newRunner(ScenarioIngest, Options{URL: "ws://127.0.0.1:1", Text: text})
		if err != nil {
			t.Fatalf("text %q: %v", text, err)
		}
		r.cancel()
	}
	if _, err := newRunner(ScenarioIngest, Options{URL: "ws://127.0.0.1:1", Text: "klingon"}); !errors.Is(err, ErrOptions) {
		t.Fatalf("text klingon: %v", err)
	}
}

// TestNegativeCounts: a negative count is refused, naming its flag; zero
// (the scenario's default) and one are taken.
func TestNegativeCounts(t *testing.T) {
	set := map[string]func(*Options, int){
		"--events": func(o *Options, n int) { o.Events = n }, "--conns": func(o *Options, n int) { o.Conns = n },
		"--subs": func(o *Options, n int) { o.Subs = n }, "--pubs": func(o *Options, n int) { o.Pubs = n },
		"--requests": func(o *Options, n int) { o.Requests = n }, "--window": func(o *Options, n int) { o.Window = n },
		"--authors": func(o *Options, n int) { o.Authors = n },
	}
	for flag, f := range set {
		for _, n := range []int{0, 1} {
			o := Options{URL: "ws://127.0.0.1:1"}
			f(&o, n)
			r, err := newRunner(ScenarioIngest, o)
			if err != nil {
				t.Fatalf("%s %d: %v", flag, n, err)
			}
			r.cancel()
		}
		o := Options{URL: "ws://127.0.0.1:1"}
		f(&o, -1)
		if _, err := newRunner(ScenarioIngest, o); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), flag+" -1: must not be negative") {
			t.Fatalf("%s -1: %v", flag, err)
		}
	}
}

// TestUntimed: the scenario's timeout stands still while untimed runs
// (signing), and runs on afterwards.
func TestUntimed(t *testing.T) {
	r, err := newRunner(ScenarioIngest, Options{URL: "ws://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.cancel()
	r.untimed(func() { time.Sleep(1500 * time.Millisecond) })
	if r.ctx.Err() != nil {
		t.Fatal("the timeout ran while untimed")
	}
	select {
	case <-r.ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the timeout never ran out after untimed")
	}
	r.untimed(func() {}) // after it ran out: f still runs, nothing breaks
}
