package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// strfryLine writes ev as a line of `strfry export` would hold it: strfry
// keeps each event's JSON as it was received, so clients' key orders and
// escapes vary; its --fried exports add a "fried" field last. style
// picks one of those forms.
func strfryLine(t *testing.T, ev *nostr.Event, style int) string {
	t.Helper()
	switch style % 3 {
	case 0: // as the author's client sent it (NIP-01's order)
		return string(ev.Raw)
	case 1: // keys sorted, HTML characters escaped (encoding/json's way)
		var m map[string]any
		if err := json.Unmarshal(ev.Raw, &m); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	default: // a --fried export: the packed event as a last field
		s := string(ev.Raw)
		return s[:len(s)-1] + `,"fried":"` + strings.Repeat("ab", 40) + `"}`
	}
}

// TestStrfryMigration: what docs/operations.md ("Migrating from strfry")
// tells an operator to do, end to end with the binary: an export file
// in strfry's format piped into petrel import, petrel serve started with
// a config file mapped from strfry.conf (its relative store.path, its
// plugin: an unchanged strfry write-policy plugin), and every exported
// event served, by id and through the indexes.
func TestStrfryMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed (scripts/setup.sh installs it)")
	}
	dir := t.TempDir()
	bin := petrelBin(t)

	// The export: notes with every kind of text, profiles, follow lists,
	// reactions, long-form articles, relay lists, and a deletion whose
	// target strfry had already removed.
	var evs []*nostr.Event
	keys := []relaytest.Key{relaytest.NewKey("strfry-a"), relaytest.NewKey("strfry-b"), relaytest.NewKey("strfry-c")}
	texts := []string{"gm", "line one\nline two\ttabbed", `quotes " and \ backslash`, "emoji 🦤 and ünïcödé", "<b>html</b> & ampersand", ""}
	for i := range 300 {
		k := keys[i%3]
		evs = append(evs, k.Event(1, fmt.Sprintf("%s #%d", texts[i%len(texts)], i), nostr.Tags{{"t", "migration"}}, fixtureBase+int64(i)))
	}
	for i, k := range keys {
		evs = append(evs,
			k.Event(0, fmt.Sprintf(`{"name":"user %d"}`, i), nil, fixtureBase+1000),
			k.Event(3, "", nostr.Tags{{"p", keys[(i+1)%3].PK.Hex()}}, fixtureBase+1000),
			k.Event(10002, "", nostr.Tags{{"r", "wss://relay.example.com"}}, fixtureBase+1000),
			k.Event(30023, "# article", nostr.Tags{{"d", fmt.Sprintf("post-%d", i)}, {"title", "T"}}, fixtureBase+1000),
			k.Event(7, "+", nostr.Tags{{"e", evs[i].ID.Hex()}, {"p", evs[i].PubKey.Hex()}}, fixtureBase+1001),
		)
	}
	gone := keys[0].Event(1, "deleted on strfry", nil, fixtureBase+2)
	evs = append(evs, keys[0].Event(5, "", nostr.Tags{{"e", gone.ID.Hex()}}, fixtureBase+2000))
	var dump strings.Builder
	for i, ev := range evs {
		dump.WriteString(strfryLine(t, ev, i))
		dump.WriteByte('\n')
	}
	exportFile := filepath.Join(dir, "strfry-export.jsonl")
	writeFile(t, exportFile, []byte(dump.String()))

	// The config mapped from strfry.conf, with a relative store path and
	// the plugin strfry ran.
	etc := filepath.Join(dir, "etc")
	os.MkdirAll(etc, 0o755)
	words := filepath.Join(etc, "spamwords.txt")
	writeFile(t, words, []byte("airdrop\n"))
	plugin, err := filepath.Abs("../../examples/plugins/spamwords.py")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(etc, "petrel.toml")
	writeFile(t, conf, fmt.Appendf(nil, `
[store]
path = "../petrel-db"   # strfry: db = "./strfry-db/"

[relay]
max_event_bytes = 65536        # events.maxEventSize
created_at_future = "900s"     # events.rejectEventsNewerThanSeconds
max_tags = 2000                # events.maxNumTags
max_message_bytes = 131072     # relay.maxWebsocketPayloadSize
max_filters = 200              # relay.maxReqFilterSize
max_limit = 500                # relay.maxFilterLimit
max_subscriptions = 20         # relay.maxSubsPerConnection
query_slice = "10ms"           # relay.queryTimesliceBudgetMicroseconds
max_neg_items = 1000000        # relay.negentropy.maxSyncEvents

[info]
name = "migrated"              # relay.info.name

[policy]
plugin = "%s %s --words %s"    # relay.writePolicy.plugin
plugin_timeout = "30s"         # (a loaded test machine starts Python slowly)
`, py, plugin, words))

	// strfry export | petrel import, from another working directory: the
	// store lands beside the config file.
	imp := exec.Command("sh", "-c", fmt.Sprintf("cat %s | %s import --config %s -q", exportFile, bin, conf))
	imp.Dir = t.TempDir()
	imp.Env = append(os.Environ(), "PETREL_CONFIG=")
	out, err := imp.CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("stored %d, duplicate 0", len(evs))) || !strings.Contains(string(out), "refused: invalid 0, bad id 0, bad signature 0") {
		t.Fatalf("import summary:\n%s", out)
	}
	data := filepath.Join(dir, "petrel-db")
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("the store is not where the config file puts it: %v", err)
	}

	srv := runServe(t, bin, data, "--config", conf)
	c := relaytest.Dial(t, srv.URL)
	served := map[nostr.ID]*nostr.Event{}
	for i := 0; i < len(evs); i += 100 {
		var ids []string
		for _, ev := range evs[i:min(i+100, len(evs))] {
			ids = append(ids, `"`+ev.ID.Hex()+`"`)
		}
		for _, ev := range c.Req("ids", `{"ids":[`+strings.Join(ids, ",")+`]}`) {
			served[ev.ID] = ev
		}
	}
	for _, ev := range evs {
		got, ok := served[ev.ID]
		if !ok {
			t.Fatalf("event %s (kind %d) is not served", ev.ID.Hex(), ev.Kind)
		}
		if string(nostr.AppendCanonical(nil, got)) != string(nostr.AppendCanonical(nil, ev)) || got.Sig != ev.Sig {
			t.Fatalf("event %s served as %s", ev.Raw, got.Raw)
		}
	}
	// Through the indexes, as clients ask.
	count := func(filter string, want int) {
		t.Helper()
		if got := len(c.Req("q", filter)); got != want {
			t.Fatalf("%s: %d events, want %d", filter, got, want)
		}
	}
	count(`{"kinds":[1],"#t":["migration"],"limit":500}`, 300)
	count(`{"authors":["`+keys[1].PK.Hex()+`"],"kinds":[0]}`, 1)
	count(`{"kinds":[30023],"#d":["post-2"]}`, 1)
	count(`{"#e":["`+evs[0].ID.Hex()+`"]}`, 1)
	count(`{"ids":["`+gone.ID.Hex()+`"]}`, 0)
	count(`{"search":"ampersand","limit":100}`, 50)

	// The deletion still holds: the deleted event cannot come back.
	if m := c.Publish(gone); m.OK {
		t.Fatalf("the event deleted on strfry was accepted again: %q", m.Message)
	}
	// The strfry plugin runs unchanged.
	if m := c.Publish(keys[2].Note("free airdrop")); m.OK || !strings.HasPrefix(m.Message, "blocked: spam") {
		t.Fatalf("the plugin did not refuse spam: %v %q\n%s", m.OK, m.Message, srv.logs.String())
	}
	c.MustPublish(keys[2].Note("a first note on petrel"))
}
