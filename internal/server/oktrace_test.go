package server_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// The OK trace on the debug listener: started and stopped by POST, one
// at a time, its records as text.
func TestOKTraceEndpoint(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{PprofListen: "127.0.0.1:0"}})
	base := "http://" + r.Server.DebugAddr().String() + "/debug/petrel/oktrace/"
	post := func(path string) (int, string) {
		t.Helper()
		res, err := http.Post(base+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := post("stop"); code != http.StatusConflict {
		t.Fatalf("stop with none running: %d", code)
	}
	// max: 1 to relay.OKTraceMax.
	for _, bad := range []string{"0", "-1", "x", fmt.Sprint(relay.OKTraceMax + 1)} {
		if code, body := post("start?max=" + bad); code != http.StatusBadRequest || !strings.Contains(body, "max:") {
			t.Errorf("max=%s: %d %q", bad, code, body)
		}
	}
	if code, _ := post(fmt.Sprintf("start?max=%d", relay.OKTraceMax)); code != http.StatusNoContent {
		t.Fatalf("start at the largest max: %d", code)
	}
	if code, _ := post("stop"); code != http.StatusOK {
		t.Fatalf("stop: %d", code)
	}
	if code, _ := post("start"); code != http.StatusNoContent {
		t.Fatalf("start: %d", code)
	}
	if code, body := post("start"); code != http.StatusConflict || !strings.Contains(body, "already running") {
		t.Fatalf("second start: %d %q", code, body)
	}
	if res, err := http.Get(base + "stop"); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %v %v", res.StatusCode, err)
	}
	if code, _ := post("nothing"); code != http.StatusNotFound {
		t.Fatalf("unknown path: %d", code)
	}
	alice := relaytest.NewKey("oktrace-endpoint")
	c := relaytest.Dial(t, r.URL)
	evs := []*nostr.Event{alice.Note("one"), alice.Note("two")}
	for _, ev := range evs {
		c.MustPublish(ev)
	}
	code, body := post("stop")
	if code != http.StatusOK {
		t.Fatalf("stop: %d %q", code, body)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Scan()
	if want := "# petrel oktrace v1: id received verified committed answered (unix ns); records 2 dropped 0"; sc.Text() != want {
		t.Fatalf("header %q, want %q", sc.Text(), want)
	}
	for i := 0; sc.Scan(); i++ {
		var id string
		var rcv, ver, com, ans int64
		if n, err := fmt.Sscanf(sc.Text(), "%s %d %d %d %d", &id, &rcv, &ver, &com, &ans); n != 5 || err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if i >= len(evs) || id != evs[i].ID.Hex() || rcv == 0 || ver < rcv || com < ver || ans < com {
			t.Fatalf("line %d %q", i, sc.Text())
		}
	}
	if code, _ := post("stop"); code != http.StatusConflict {
		t.Fatalf("second stop: %d", code)
	}
}

// TestPprofListenWarning: the debug listener has no authentication, so
// one that is not on loopback is warned about at start; on loopback it
// is not.
func TestPprofListenWarning(t *testing.T) {
	t.Parallel()
	const warning = "server.pprof_listen is not on loopback"
	for addr, warned := range map[string]bool{"127.0.0.1:0": false, "0.0.0.0:0": true} {
		var logs relaytest.SyncBuffer
		r := relaytest.Start(t, relaytest.Options{
			Server: server.Config{PprofListen: addr},
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		if got := strings.Contains(logs.String(), warning); got != warned {
			t.Errorf("pprof_listen %s (%s): warned %v, want %v; log:\n%s", addr, r.Server.DebugAddr(), got, warned, logs.String())
		}
	}
}
