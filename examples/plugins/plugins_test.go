// Package plugins holds the tests of the example write-policy plugins
// (spamwords.py, allowlist/): each runs as the plugin of a real relay and
// is driven over a WebSocket.
package plugins

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// publish sends ev and checks the answer: accepted, or refused with a
// message starting with want.
func publish(t *testing.T, c *relaytest.Client, ev *nostr.Event, want string) {
	t.Helper()
	m := c.Publish(ev)
	if want == "" && (!m.OK || m.Message != "") {
		t.Fatalf("%q: refused %q, want accepted", ev.Content, m.Message)
	}
	if want != "" && (m.OK || !strings.HasPrefix(m.Message, want)) {
		t.Fatalf("%q: OK %v %q, want refused %q", ev.Content, m.OK, m.Message, want)
	}
}

// stored reports whether the relay serves ev.
func stored(t *testing.T, c *relaytest.Client, ev *nostr.Event) bool {
	t.Helper()
	return len(c.Req("q", `{"ids":["`+ev.ID.Hex()+`"]}`)) == 1
}

// eventually publishes a fresh event from mk until the answer is the one
// wanted (the plugins re-read their list files at most once a second).
func eventually(t *testing.T, c *relaytest.Client, mk func(i int) *nostr.Event, accepted bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		m := c.Publish(mk(i))
		if m.OK == accepted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin did not take the changed list: last answer %v %q", m.OK, m.Message)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeList writes a list file with a new modification time.
func writeList(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSpamWordsPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed (scripts/setup.sh installs it)")
	}
	script, err := filepath.Abs("spamwords.py")
	if err != nil {
		t.Fatal(err)
	}
	words := filepath.Join(t.TempDir(), "words.txt")
	writeList(t, words, "# spam", "free bitcoin", "airdrop")
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{
		Plugin: fmt.Sprintf("%s %s --words %s --kinds 1", py, script, words),
		// A loaded test machine can take seconds to start Python; the
		// default 2s would refuse the first events.
		PluginTimeout: 30 * time.Second,
	}})
	c := relaytest.Dial(t, r.URL)
	k := relaytest.NewKey("spamwords")

	ok := k.Note("hello, world")
	publish(t, c, ok, "")
	spam := k.Note("Get FREE Bitcoin now")
	publish(t, c, spam, "blocked: spam ('free bitcoin')")
	publish(t, c, k.Note("the big AIRDROP!"), "blocked: spam ('airdrop')")
	publish(t, c, k.Note("airdrops and wholesale prices"), "")  // whole words only
	publish(t, c, k.Event(0, `{"name":"airdrop"}`, nil, 0), "") // only kind 1 is checked
	if !stored(t, c, ok) || stored(t, c, spam) {
		t.Fatal("the accepted note must be served and the refused one not")
	}
	// The list is read again when it changes.
	writeList(t, words, "free bitcoin", "airdrop", "casino")
	eventually(t, c, func(i int) *nostr.Event { return k.Note(fmt.Sprintf("casino night %d", i)) }, false)
	publish(t, c, k.Note("no casinos here"), "")
}

func TestAllowListGo(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "allowlist")
	if out, err := exec.Command("go", "build", "-o", bin, "./allowlist").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	alice, bob, carol := relaytest.NewKey("allow-alice"), relaytest.NewKey("allow-bob"), relaytest.NewKey("allow-carol")
	members := filepath.Join(dir, "members.txt")
	writeList(t, members, "# members", alice.PK.Hex()+" alice")
	r := relaytest.Start(t, relaytest.Options{
		Relay:  relay.Config{AuthOnConnect: true},
		Policy: policy.Config{Plugin: bin + " -tagged -authed -pubkeys " + members, PluginTimeout: 30 * time.Second},
	})
	c := relaytest.Dial(t, r.URL)
	c.ExpectType("AUTH") // the challenge; this connection does not log in

	const refused = "restricted: this relay accepts events from its members only"
	fromAlice := alice.Note("a member's note")
	publish(t, c, fromAlice, "")
	fromBob := bob.Note("an outsider's note")
	publish(t, c, fromBob, refused)
	publish(t, c, bob.Note("a reply to a member", nostr.Tag{"p", alice.PK.Hex()}), "") // -tagged
	publish(t, c, bob.Note("a mention of an outsider", nostr.Tag{"p", carol.PK.Hex()}), refused)
	if !stored(t, c, fromAlice) || stored(t, c, fromBob) {
		t.Fatal("the member's note must be served and the outsider's not")
	}

	// -authed: a connection logged in as a member may publish others'
	// events (a member re-broadcasting).
	ac := relaytest.Dial(t, r.URL)
	ch := ac.ExpectType("AUTH").Message
	auth := alice.Event(nostr.KindClientAuth, "", nostr.Tags{{"relay", r.URL}, {"challenge", ch}}, 0)
	ac.SendRaw(`["AUTH",` + string(auth.Raw) + `]`)
	if m := ac.ExpectType("OK"); !m.OK {
		t.Fatalf("AUTH: %q", m.Message)
	}
	publish(t, ac, carol.Note("carried by a member"), "")

	// The list is read again when it changes: bob becomes a member.
	writeList(t, members, alice.PK.Hex(), bob.PK.Hex())
	eventually(t, c, func(i int) *nostr.Event { return bob.Note(fmt.Sprintf("now a member %d", i)) }, true)
	publish(t, c, carol.Note("still an outsider"), refused)
}
