package stream

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

// writeFile writes a router config to a temporary file.
func writeFile(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "router.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRouterExample: the example file shipped in deploy/ loads and
// defines the streams it describes.
func TestRouterExample(t *testing.T) {
	t.Parallel()
	rc, err := LoadRouterConfig("../../deploy/router.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := rc.Streams("ws://127.0.0.1:7447", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name, remote string
		dir          Direction
		catchUp      time.Duration
	}
	var got []row
	for _, o := range opts {
		got = append(got, row{o.Name, o.Remote, o.Direction, o.CatchUp})
	}
	want := []row{
		{"backup", "wss://backup.example", psync.Up, time.Hour},
		{"friends", "wss://relay.friend-one.example", psync.Both, time.Hour},
		{"friends", "wss://relay.friend-two.example", psync.Both, time.Hour},
		{"hashtag", "wss://big-relay.example", psync.Down, 6 * time.Hour},
	}
	if len(got) != len(want) {
		t.Fatalf("streams %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stream %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	tagged := opts[3].Filter
	if !slices.Equal(tagged.Kinds, []int{1}) || len(tagged.Tags) != 1 || tagged.Tags[0].Values[0] != "nostr" {
		t.Fatalf("hashtag filter %+v", tagged)
	}
	if opts[0].Local != "ws://127.0.0.1:7447" || opts[0].Remember != 100000 || opts[0].Window != 64 {
		t.Fatalf("defaults not applied: %+v", opts[0])
	}
}

// TestRouterConfigErrors: what a router file may not say.
func TestRouterConfigErrors(t *testing.T) {
	t.Parallel()
	f := func(text, want string) {
		t.Helper()
		rc, err := LoadRouterConfig(writeFile(t, text))
		if err == nil {
			_, err = rc.Streams("ws://127.0.0.1:7447", nil, nil)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: %v, want %q", text, err, want)
		}
	}
	f(``, "no [groups.<name>]")
	f("[groups.a]\ndir = \"sideways\"\nurls = [\"ws://x:1\"]", `group "a": dir "sideways"`)
	f("[groups.a]\ndir = \"down\"", `group "a": no urls`)
	f("[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\", \"ws://x:1\"]", "listed twice")
	f("[groups.a]\ndir = \"down\"\nurls = [\"http://x:1\"]", "remote")
	f("[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]\nfilter = { kinds = \"one\" }", "filter")
	f("[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]\nfliter = { kinds = [1] }", "unknown keys: groups.a.fliter (did you mean groups.a.filter?)")
	// A bare number would be nanoseconds.
	f("catchup = 30\n[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]", "catchup = 30: a duration is a string with its unit")
	f("[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]\ncatchup = 30", "groups.a.catchup = 30: a duration is a string with its unit")
	f("lcoal = \"ws://x:2\"\n[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]", "unknown keys: lcoal")
	// A typo inside the filter would otherwise widen it to every event.
	f("[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]\nfilter = { kind = [1] }", `unknown filter key "kind"`)
	f("catchup = \"soon\"\n[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]", "catchup")
	// Negative counts are refused (they used to pass for the default);
	// zero is the default.
	f("window = -1\n[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]", `group "a": stream: invalid options: window -1: must not be negative`)
	f("[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]\nremember = -5", "remember -5: must not be negative")
	rc, err := LoadRouterConfig(writeFile(t, "window = 0\nremember = 0\n[groups.a]\ndir = \"down\"\nurls = [\"ws://x:1\"]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Streams("ws://127.0.0.1:7447", nil, nil); err != nil {
		t.Fatalf("window and remember 0 (the defaults): %v", err)
	}
}

// TestRouter runs a router over three relays: the local one, one pulled
// from (down, kind 1 only) and one mirrored both ways. An event
// published on the pulled relay reaches the local relay and, through
// it, the mirrored one; nothing goes up to the pulled relay. A reload
// that drops the pull and adds a push keeps the mirror running.
func TestRouter(t *testing.T) {
	t.Parallel()
	local := relaytest.Start(t, relaytest.Options{})
	pulled := relaytest.Start(t, relaytest.Options{})
	mirrored := relaytest.Start(t, relaytest.Options{})
	pushed := relaytest.Start(t, relaytest.Options{})
	path := writeFile(t, `
local = "`+local.URL+`"
catchup = "10m"
[groups.pull]
dir = "down"
urls = ["`+pulled.URL+`"]
filter = { kinds = [1] }
[groups.mirror]
dir = "both"
urls = ["`+mirrored.URL+`"]
`)
	load := func() []Options {
		rc, err := LoadRouterConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := rc.Streams("", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range opts {
			opts[i].MinBackoff, opts[i].MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
		}
		return opts
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := NewRouter(ctx, nil)
	if started, _, _, err := r.Apply(load()); err != nil || started != 2 {
		t.Fatalf("apply: %d started, %v", started, err)
	}
	waitFor(t, "both streams", func() bool {
		st := r.Stats()
		return len(st) == 2 && st[0].CatchUps == 1 && st[1].CatchUps == 1
	})
	notes := events("router-note", 5)
	k := relaytest.NewKey("router-reaction")
	reactions := []*nostr.Event{k.Event(7, "+", nil, time.Now().Unix())}
	publish(t, pulled.URL, append(notes, reactions...))
	onMirror := events("router-mirror", 4)
	publish(t, mirrored.URL, onMirror)
	waitFor(t, "the routed events", func() bool {
		return len(ids(t, local.Store)) == 9 && len(ids(t, mirrored.Store)) == 9
	})
	time.Sleep(300 * time.Millisecond)
	if n := len(ids(t, pulled.Store)); n != 6 {
		t.Fatalf("the pulled relay holds %d events, want its own 6", n)
	}
	if n := len(ids(t, local.Store)); n != 9 { // 5 notes (not the reaction) + 4
		t.Fatalf("local holds %d events", n)
	}

	// Reload: the pull group goes, a push group comes, the mirror stays.
	if err := os.WriteFile(path, []byte(`
local = "`+local.URL+`"
catchup = "10m"
[groups.mirror]
dir = "both"
urls = ["`+mirrored.URL+`"]
[groups.push]
dir = "up"
urls = ["`+pushed.URL+`"]
filter = { kinds = [1] }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	mirrorBefore := r.Stats()[0]
	started, stopped, kept, err := r.Apply(load())
	if err != nil || started != 1 || stopped != 1 || kept != 1 {
		t.Fatalf("reload: started %d, stopped %d, kept %d, %v", started, stopped, kept, err)
	}
	st := r.Stats()
	if len(st) != 2 || st[0].Name != "mirror" || st[0].Sessions != mirrorBefore.Sessions || st[1].Name != "push" {
		t.Fatalf("after reload: %+v", st)
	}
	// The push group's first catch-up sends the local relay's 9 notes.
	waitFor(t, "the pushed events", func() bool { return len(ids(t, pushed.Store)) == 9 })
	cancel()
	r.Wait()
}
