package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestServeReload: SIGHUP makes petrel serve read its configuration
// again. The write lists' configuration layer is applied at once (a ban
// added refuses the next event on a connection already open, a ban
// removed lets it through, a NIP-86 ban stays), so are [info], the rate
// limits, the proof of work and [relay]'s message limits (to the open
// connection's next message and in NIP-11's limitation); other changed
// keys are
// logged as waiting for the next start (and --listen, a flag, is not
// one); a configuration serve --check would refuse changes nothing and
// the relay goes on serving.
func TestServeReload(t *testing.T) {
	bin := petrelBin(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "petrel.toml")
	admin, alice, bob := relaytest.NewKey("reload admin"), relaytest.NewKey("reload alice"), relaytest.NewKey("reload bob")
	write := func(policy string, info ...string) {
		t.Helper()
		text := "[server]\nadmins = [\"" + admin.PK.Hex() + "\"]\n[info]\n" + strings.Join(info, "\n") + "\n[policy]\n" + policy
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	p := startServeProc(t, bin, nil, "--config", conf, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	reloads := 0
	hup := func(want string) string {
		t.Helper()
		reloads++
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			lines := reloadLines(p.Log())
			if len(lines) >= reloads {
				line := lines[reloads-1]
				if !strings.Contains(line, want) {
					t.Fatalf("reload %d logged %q, want %q in it", reloads, line, want)
				}
				return line
			}
			if time.Now().After(deadline) {
				t.Fatalf("no reload logged 30s after SIGHUP %d:\n%s", reloads, p.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	c := relaytest.Dial(t, p.URL)
	publish := func(k relaytest.Key, text string, ok bool) {
		t.Helper()
		m := c.Publish(k.Note(text))
		if m.OK != ok || (!ok && !strings.HasPrefix(m.Message, "blocked:")) {
			t.Fatalf("%s: OK %v %q, want OK %v (blocked: if false)", text, m.OK, m.Message, ok)
		}
	}
	publish(alice, "before the ban", true)

	// Nothing changed: nothing applied, nothing waiting.
	hup(`msg="config reloaded" applied=[] closed_connections=0 at_next_start=[]`)

	// A ban by the file (as an npub), beside a NIP-86 ban, and a setting
	// that needs a restart.
	if code, out := relaytest.NIP86(t, p.HTTP, admin, "banpubkey", bob.PK.Hex()); code != 200 {
		t.Fatalf("NIP-86 ban: %d %v", code, out)
	}
	write("banned_pubkeys = [\"" + nip19.EncodePubKey(alice.PK) + "\"]\nblocked_ips = [\"192.0.2.0/24\"]\n[relay]\nquery_workers = 3\n")
	hup(`applied="[policy.banned_pubkeys policy.blocked_ips]" closed_connections=0 at_next_start=[relay.query_workers]`)
	publish(alice, "after the ban", false)
	publish(bob, "banned by NIP-86", false)

	// A configuration that would not start: refused, the relay as it was.
	write("banned_pubkeys = [\"zz\"]\n")
	line := hup(`msg="config reload refused; running as before"`)
	if !strings.Contains(line, `banned_pubkeys: not a public key (64 hex characters, npub or nprofile): \"zz\"`) {
		t.Fatalf("the refusal does not say what is wrong: %s", line)
	}
	publish(alice, "still banned", false)

	// The ban off the file: alice publishes again; the NIP-86 ban stays.
	write("")
	hup(`applied="[policy.banned_pubkeys policy.blocked_ips]" closed_connections=0 at_next_start=[]`)
	publish(alice, "after the ban is lifted", true)
	publish(bob, "still banned by NIP-86", false)

	// [info] applies at once; a description set through NIP-86 stays over
	// the file's, as at a start.
	write("", `name = "reloaded"`, `description = "from the file"`)
	hup(`applied="[info.description info.name]" closed_connections=0 at_next_start=[]`)
	if doc := nip11(t, p.HTTP); doc["name"] != "reloaded" || doc["description"] != "from the file" {
		t.Fatalf("NIP-11 after the reload: %v", doc)
	}
	if code, out := relaytest.NIP86(t, p.HTTP, admin, "changerelaydescription", "by NIP-86"); code != 200 {
		t.Fatalf("NIP-86 description: %d %v", code, out)
	}
	write("", `name = "reloaded"`, `description = "from the file, again"`)
	hup(`applied=[info.description]`)
	if doc := nip11(t, p.HTTP); doc["description"] != "by NIP-86" {
		t.Fatalf("NIP-11 description after a reload over a NIP-86 change: %v", doc["description"])
	}

	// Rate limits and the proof of work apply at once, to the open
	// connection too.
	carol := relaytest.NewKey("reload carol")
	refused := func(text, prefix string) {
		t.Helper()
		if m := c.Publish(carol.Note(text)); m.OK || !strings.HasPrefix(m.Message, prefix) {
			t.Fatalf("%s: OK %v %q, want refused with %s", text, m.OK, m.Message, prefix)
		}
	}
	info := []string{`name = "reloaded"`, `description = "from the file, again"`}
	write("event_rate = 0.001\nevent_burst = 1\n[relay]\nmax_subscriptions = 1\n", info...)
	hup(`applied="[policy.event_burst policy.event_rate relay.max_subscriptions]" closed_connections=0 at_next_start=[]`)
	c.MustPublish(carol.Note("the burst of one"))
	refused("past the burst", "rate-limited:")
	c.Req("one", `{"kinds":[7]}`)
	c.SendRaw(`["REQ","two",{"kinds":[7]}]`)
	c.ExpectClosed("two", "blocked: too many open subscriptions")
	c.Send("CLOSE", "one")
	write("min_pow_difficulty = 28\n", info...)
	hup(`applied="[policy.event_burst policy.event_rate policy.min_pow_difficulty relay.max_subscriptions]" closed_connections=0 at_next_start=[]`)
	refused("without work", "pow:")
	if lim, _ := nip11(t, p.HTTP)["limitation"].(map[string]any); lim["min_pow_difficulty"] != 28.0 {
		t.Fatalf("NIP-11 limitation after the reload: %v", lim)
	}
	// The connection rate too: from 127.0.0.2, the burst of one, then
	// the next connection closed at accept.
	write("connect_rate = 0.001\nconnect_burst = 1\n", info...)
	hup(`applied="[policy.connect_burst policy.connect_rate policy.min_pow_difficulty]" closed_connections=0 at_next_start=[]`)
	if _, err := relaytest.DialWith(t, p.URL, relaytest.DialOptions{LocalIP: "127.0.0.2"}); err != nil {
		t.Fatalf("the burst of one connection: %v", err)
	}
	if _, err := relaytest.DialWith(t, p.URL, relaytest.DialOptions{LocalIP: "127.0.0.2"}); err == nil {
		t.Fatal("a connection past connect_rate's burst was admitted")
	}
	st := p.Stats(t)
	if st.LimitTrips["connect_rate_ip"] != 1 {
		t.Fatalf("limits_tripped.connect_rate_ip %d, want 1", st.LimitTrips["connect_rate_ip"])
	}
	if st.EventsAccepted != 3 {
		t.Fatalf("accepted %d events, want 3", st.EventsAccepted)
	}
	if r := st.ConfigReloads; r.Applied != int64(reloads-1) || r.Refused != 1 || r.LastRefused {
		t.Fatalf("/stats config_reloads %+v after %d reloads, one refused", r, reloads)
	}
}

// reloadLines returns the log's reload lines, in order.
func reloadLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `msg="config reload`) {
			out = append(out, l)
		}
	}
	return out
}

// nip11 reads the relay's NIP-11 document at base (http://host:port).
func nip11(t *testing.T, base string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}
