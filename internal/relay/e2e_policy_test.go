package relay_test

// The write policy end to end: rate limits, write lists, blocked
// addresses and the write-policy plugin.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// testPluginEnv makes the test binary run as a write-policy plugin
// (runTestPlugin) instead of running tests.
const testPluginEnv = "PETREL_TEST_RELAY_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(testPluginEnv) != "" {
		os.Exit(runTestPlugin())
	}
	os.Exit(m.Run())
}

// runTestPlugin speaks strfry's plugin protocol and decides by content:
// "reject" is rejected with "blocked: plugin says no", "shadow" is
// shadow-rejected, "whoami" is rejected with a message naming the
// request's authed and sourceType fields; the rest is accepted. "late" is
// accepted, but answered only after the next request's answer, so that
// answers come back out of order.
func runTestPlugin() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	var late []byte
	for in.Scan() {
		var req struct {
			Event struct {
				ID      string `json:"id"`
				Content string `json:"content"`
			} `json:"event"`
			SourceType string `json:"sourceType"`
			Authed     string `json:"authed"`
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			return 2
		}
		action, msg := "accept", ""
		switch req.Event.Content {
		case "reject":
			action, msg = "reject", "blocked: plugin says no"
		case "shadow":
			action = "shadowReject"
		case "whoami":
			action, msg = "reject", "blocked: authed="+req.Authed+" source="+req.SourceType
		}
		b, _ := json.Marshal(map[string]string{"id": req.Event.ID, "action": action, "msg": msg})
		if req.Event.Content == "late" && late == nil {
			late = append(b, '\n')
			continue
		}
		out.Write(append(b, '\n'))
		if late != nil {
			out.Write(late)
			late = nil
		}
		out.Flush()
	}
	return 0
}

// writeTestPlugin writes a script running the test binary as a plugin and
// returns its path.
func writeTestPlugin(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plugin.sh")
	script := "#!/bin/sh\n" + testPluginEnv + "=1 GORACE=atexit_sleep_ms=0 exec '" + strings.ReplaceAll(exe, "'", `'\''`) + "'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPolicyPlugin(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{
		Relay:  relay.Config{AuthOnConnect: true},
		Policy: policy.Config{Plugin: writeTestPlugin(t)},
	})
	alice := relaytest.NewKey("alice")
	watcher := dialAuthed(t, r)
	watcher.Req("all", `{}`)
	c := dialAuthed(t, r, alice)

	ok := alice.Note("fine")
	c.MustPublish(ok)
	if m := watcher.ExpectType("EVENT"); m.Event.ID != ok.ID {
		t.Fatalf("watcher got %s", describe(m))
	}
	if m := c.Publish(alice.Note("reject")); m.OK || m.Message != "blocked: plugin says no" {
		t.Fatalf("reject: %+v", m)
	}
	shadow := alice.Note("shadow")
	if m := c.Publish(shadow); !m.OK || m.Message != "" {
		t.Fatalf("shadowReject: %+v", m)
	}
	want := "blocked: authed=" + alice.PK.Hex() + " source=IP4"
	if m := c.Publish(alice.Note("whoami")); m.OK || m.Message != want {
		t.Fatalf("whoami: %+v, want %q", m, want)
	}
	// The shadow-rejected event was neither broadcast nor stored.
	expectQuiet(t, watcher)
	if has, _ := r.Store.Has(t.Context(), shadow.ID); has {
		t.Fatal("shadow-rejected event stored")
	}
	// Ephemeral events go through the plugin too.
	eph := alice.Event(20001, "reject", nil, 0)
	if m := c.Publish(eph); m.OK {
		t.Fatalf("ephemeral: %+v", m)
	}
	st := r.Stats()
	if st.EventsShadowRejected != 1 || st.Policy.Plugin == nil || st.Policy.Plugin.Accepted != 1 || st.Policy.Plugin.Rejected != 3 {
		t.Fatalf("stats: shadow %d plugin %+v", st.EventsShadowRejected, st.Policy.Plugin)
	}
	full := statsJSON(t, r)
	if m := full["policy"].(map[string]any)["plugin"].(map[string]any); m["shadow_rejected"] != float64(1) || m["accepted"] != float64(1) {
		t.Fatalf("/stats policy.plugin %v", m)
	}
	checkStatsKeys(t, "", full)
}

// TestPolicyPluginOrder: the plugin answers a connection's events out of
// order, yet they reach the store in the order the connection sent them:
// an older addressable version the plugin answers late still comes
// before the newer one it answered first.
func TestPolicyPluginOrder(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{Plugin: writeTestPlugin(t)}})
	alice := relaytest.NewKey("plugin-order")
	c := relaytest.Dial(t, r.URL)
	for round := 0; round < 5; round++ {
		ts := time.Now().Unix() - 100 + int64(10*round)
		older := alice.Event(30078, "late", nostr.Tags{{"d", "app"}}, ts)
		newer := alice.Event(30078, "second", nostr.Tags{{"d", "app"}}, ts+1)
		c.SendRaw(`["EVENT",` + string(older.Raw) + `]`)
		c.SendRaw(`["EVENT",` + string(newer.Raw) + `]`)
		for _, ev := range []*nostr.Event{older, newer} {
			if m := c.ExpectType("OK"); m.EventID != ev.ID || !m.OK || m.Message != "" {
				t.Fatalf("round %d: %s, want OK true for %s", round, describe(m), ev.Content)
			}
		}
		if got := c.Req("q", authorFilter(alice, `"kinds":[30078]`)); len(got) != 1 || got[0].ID != newer.ID {
			t.Fatalf("round %d: %d stored versions, want the newer", round, len(got))
		}
		c.SendRaw(`["CLOSE","q"]`)
	}
}

func TestPolicyRateLimitEvents(t *testing.T) {
	t.Parallel()
	// Rates so low that no token comes back during the test.
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{EventRate: 0.001, EventBurst: 3}})
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, r.URL)
	for i := range 3 {
		c.MustPublish(alice.Note(fmt.Sprint("ok ", i))) // at the limit
	}
	if m := c.Publish(alice.Note("one too many")); m.OK || !strings.HasPrefix(m.Message, "rate-limited: ") {
		t.Fatalf("past the limit: %+v", m)
	}
	// The limit is per address: another connection from it is limited too.
	c2 := relaytest.Dial(t, r.URL)
	if m := c2.Publish(relaytest.NewKey("bob").Note("x")); m.OK {
		t.Fatalf("same address: %+v", m)
	}
	doc := statsJSON(t, r)
	rl := doc["policy"].(map[string]any)["event_rate_ip"].(map[string]any)
	if rl["limited"] != float64(2) || rl["keys"] != float64(1) {
		t.Fatalf("/stats policy.event_rate_ip %v", rl)
	}
	if lt := doc["limits_tripped"].(map[string]any)["event_rate_ip"]; lt != float64(2) {
		t.Fatalf("/stats limits_tripped.event_rate_ip %v", lt)
	}
	if rej := doc["events_rejected"].(map[string]any)["rate-limited"]; rej != float64(2) {
		t.Fatalf("/stats events_rejected.rate-limited %v", rej)
	}
}

func TestPolicyRateLimitPubKey(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{PubKeyEventRate: 0.001, PubKeyEventBurst: 2}})
	alice, bob := relaytest.NewKey("alice"), relaytest.NewKey("bob")
	c1, c2 := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	c1.MustPublish(alice.Note("1"))
	c2.MustPublish(alice.Note("2"))
	if m := c1.Publish(alice.Note("3")); m.OK || !strings.HasPrefix(m.Message, "rate-limited: slow down: this pubkey") {
		t.Fatalf("third by alice: %+v", m)
	}
	c1.MustPublish(bob.Note("bob has his own bucket"))
	// A forged event in alice's name does not drain her bucket: it fails
	// verification before the pubkey limit is looked at.
	r2 := relaytest.Start(t, relaytest.Options{Policy: policy.Config{PubKeyEventRate: 0.001, PubKeyEventBurst: 1}})
	c3 := relaytest.Dial(t, r2.URL)
	forged := *alice.Note("forged")
	forged.Sig[5] ^= 0xff
	forged.Raw = nostr.Serialize(&forged)
	if m := c3.Publish(&forged); m.OK || m.Message != "invalid: bad signature" {
		t.Fatalf("forged: %+v", m)
	}
	c3.MustPublish(alice.Note("the real alice"))
	if st := r.Stats(); st.LimitTrips["event_rate_pubkey"] != 1 || st.Policy.EventRatePubKey.Limited != 1 {
		t.Fatalf("trips %d limited %d", st.LimitTrips["event_rate_pubkey"], st.Policy.EventRatePubKey.Limited)
	}
}

func TestPolicyLists(t *testing.T) {
	t.Parallel()
	mallory, alice := relaytest.NewKey("mallory"), relaytest.NewKey("alice")
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{
		BannedPubKeys:   []string{mallory.PK.Hex()},
		DisallowedKinds: []int{30023},
	}})
	c := relaytest.Dial(t, r.URL)
	if m := c.Publish(mallory.Note("hi")); m.OK || m.Message != "blocked: this pubkey is banned from this relay" {
		t.Fatalf("banned: %+v", m)
	}
	if m := c.Publish(alice.Event(30023, "article", nostr.Tags{{"d", "x"}}, 0)); m.OK || !strings.HasPrefix(m.Message, "blocked: events of kind 30023") {
		t.Fatalf("disallowed kind: %+v", m)
	}
	c.MustPublish(alice.Note("hi"))
	// A request to vanish is honoured whatever the user's status.
	c.MustPublish(mallory.Event(62, "", nostr.Tags{{"relay", "ALL_RELAYS"}}, 0))
}

func TestPolicyBlockedIP(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{BlockedIPs: []string{"127.0.0.0/8"}}})
	c := relaytest.Dial(t, r.URL)
	if m := c.Read(); m.Type != "NOTICE" || m.Message != "blocked: your address is blocked by this relay" {
		t.Fatalf("got %s", describe(m))
	}
	if code := c.WaitClosed(relaytest.DefaultTimeout); code != 1008 {
		t.Fatalf("close code %d", code)
	}
	waitFor(t, "the session to end", func() bool { return r.Relay.Sessions() == 0 })
	if st := r.Stats(); st.ConnectionsBlocked != 1 {
		t.Fatalf("connections_blocked %d", st.ConnectionsBlocked)
	}
}
