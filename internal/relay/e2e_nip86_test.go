package relay_test

// The NIP-86 management API, wired into the server, end to end.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nip98"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store/postgres"
)

// nip86 calls method on r as k and returns the HTTP status and the
// decoded body.
func nip86(t testing.TB, r *relaytest.Relay, k relaytest.Key, method string, params ...any) (int, map[string]any) {
	t.Helper()
	return relaytest.NIP86(t, r.HTTPURL(), k, method, params...)
}

func nip11Doc(t testing.TB, r *relaytest.Relay) map[string]any {
	t.Helper()
	_, body := getHTTP(t, r, "GET", "/", map[string]string{"Accept": "application/nostr+json"})
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestNIP86BanPubKey(t *testing.T) {
	t.Parallel()
	admin, mallory, alice := relaytest.NewKey("admin"), relaytest.NewKey("mallory"), relaytest.NewKey("alice")
	r := relaytest.Start(t, relaytest.Options{
		Relay:  relay.Config{AuthOnConnect: true},
		Server: server.Config{Admins: []string{admin.PK.Hex()}},
	})
	// mallory is connected, authenticated, and publishing.
	mc := dialAuthed(t, r, mallory)
	mc.MustPublish(mallory.Note("before"))
	other := relaytest.Dial(t, r.URL)
	expectChallenge(t, other)
	other.MustPublish(mallory.Note("also before"))

	// A non-admin may not.
	if code, body := nip86(t, r, alice, "banpubkey", mallory.PK.Hex(), "spam"); code != 401 || !strings.HasPrefix(body["error"].(string), "unauthorized") {
		t.Fatalf("non-admin: %d %v", code, body)
	}
	if code, body := nip86(t, r, admin, "banpubkey", mallory.PK.Hex(), "spam"); code != 200 || body["result"] != true {
		t.Fatalf("banpubkey: %d %v", code, body)
	}
	// mallory's authenticated connection is closed; her next EVENT on
	// any connection is refused.
	if code := mc.WaitClosed(relaytest.DefaultTimeout); code != 1008 {
		t.Fatalf("close code %d", code)
	}
	if m := other.Publish(mallory.Note("after")); m.OK || m.Message != "blocked: this pubkey is banned from this relay" {
		t.Fatalf("after ban: %+v", m)
	}
	other.MustPublish(alice.Note("others are fine"))
	_, body := nip86(t, r, admin, "listbannedpubkeys")
	if list := body["result"].([]any); len(list) != 1 || list[0].(map[string]any)["pubkey"] != mallory.PK.Hex() {
		t.Fatalf("listbannedpubkeys %v", body)
	}
	doc := nip11Doc(t, r)
	if nips := doc["supported_nips"].([]any); !containsAny(nips, 86) {
		t.Fatalf("supported_nips %v", nips)
	}
	if doc["limitation"].(map[string]any)["restricted_writes"] != false {
		t.Fatalf("limitation %v", doc["limitation"])
	}
	// An allow list restricts writes from then on.
	if code, body := nip86(t, r, admin, "allowpubkey", alice.PK.Hex()); code != 200 || body["result"] != true {
		t.Fatalf("allowpubkey: %d %v", code, body)
	}
	if doc := nip11Doc(t, r); doc["limitation"].(map[string]any)["restricted_writes"] != true {
		t.Fatalf("limitation after allowpubkey %v", doc["limitation"])
	}
	if m := other.Publish(relaytest.NewKey("bob").Note("not on the list")); m.OK || !strings.HasPrefix(m.Message, "blocked: ") {
		t.Fatalf("not allowed: %+v", m)
	}
}

// TestNIP86Replay: an accepted Authorization header sent again is refused
// (and the change it carries is not made twice), while a freshly signed
// one for the same call is accepted.
func TestNIP86Replay(t *testing.T) {
	t.Parallel()
	admin, alice := relaytest.NewKey("admin"), relaytest.NewKey("alice")
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{Admins: []string{admin.PK.Hex()}}})
	url := r.HTTPURL() + "/"
	body := []byte(`{"method":"banpubkey","params":["` + alice.PK.Hex() + `"]}`)
	auth := nip98.Header(admin.SK, "POST", url, body, time.Now())
	if code, out := relaytest.NIP86With(t, url, body, auth); code != 200 || out["result"] != true {
		t.Fatalf("first use: %d %v", code, out)
	}
	if code, out := relaytest.NIP86With(t, url, body, auth); code != 401 || !strings.Contains(out["error"].(string), "already used") {
		t.Fatalf("replay: %d %v; want 401 already used", code, out)
	}
	if code, out := relaytest.NIP86With(t, url, body, nip98.Header(admin.SK, "POST", url, body, time.Now())); code != 200 || out["result"] != true {
		t.Fatalf("fresh token for the same call: %d %v", code, out)
	}
}

func containsAny(list []any, v float64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func TestNIP86RelayInfoPersists(t *testing.T) {
	t.Parallel()
	admin := relaytest.NewKey("admin")
	p := &policy.MemPersister{}
	opts := relaytest.Options{
		Server:    server.Config{Admins: []string{admin.PK.Hex()}},
		Info:      relay.Info{Name: "from config", Description: "config description"},
		Persister: p,
	}
	r := relaytest.Start(t, opts)
	for _, c := range [][2]string{{"changerelayname", "renamed"}, {"changerelaydescription", "new words"}, {"changerelayicon", "https://example.com/i.png"}} {
		if code, body := nip86(t, r, admin, c[0], c[1]); code != 200 || body["result"] != true {
			t.Fatalf("%s: %d %v", c[0], code, body)
		}
	}
	doc := nip11Doc(t, r)
	if doc["name"] != "renamed" || doc["description"] != "new words" || doc["icon"] != "https://example.com/i.png" {
		t.Fatalf("NIP-11 after changes: %v", doc)
	}
	// A restarted relay with the same persister keeps them.
	r.Stop()
	r2 := relaytest.Start(t, opts)
	if doc := nip11Doc(t, r2); doc["name"] != "renamed" || doc["description"] != "new words" {
		t.Fatalf("NIP-11 after restart: %v", doc)
	}
}

func TestNIP86BlockIPAndDeleteEvent(t *testing.T) {
	t.Parallel()
	admin, alice := relaytest.NewKey("admin"), relaytest.NewKey("alice")
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{Admins: []string{admin.PK.Hex()}}})
	c := relaytest.Dial(t, r.URL)
	ev := alice.Note("to be banned")
	c.MustPublish(ev)
	if code, body := nip86(t, r, admin, "banevent", ev.ID.Hex(), "bad"); code != 200 || body["result"] != true {
		t.Fatalf("banevent: %d %v", code, body)
	}
	if has, _ := r.Store.Has(t.Context(), ev.ID); has {
		t.Fatal("banned event still stored")
	}
	if m := c.Publish(ev); m.OK || m.Message != "blocked: this event is banned from this relay" {
		t.Fatalf("banned event again: %+v", m)
	}
	if code, body := nip86(t, r, admin, "blockip", "127.0.0.1", "test"); code != 200 || body["result"] != true {
		t.Fatalf("blockip: %d %v", code, body)
	}
	if code := c.WaitClosed(relaytest.DefaultTimeout); code != 1008 {
		t.Fatalf("close code %d", code)
	}
	// New connections from the address are refused.
	c2 := relaytest.Dial(t, r.URL)
	if m := c2.Read(); m.Type != "NOTICE" || !strings.HasPrefix(m.Message, "blocked: ") {
		t.Fatalf("after blockip: %s", describe(m))
	}
	// The CORS preflight of a NIP-86 call allows its headers.
	resp, _ := getHTTP(t, r, "OPTIONS", "/", map[string]string{
		"Origin": "https://admin.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type",
	})
	if h := resp.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(h, "Authorization") || !strings.Contains(h, "Content-Type") {
		t.Fatalf("preflight Access-Control-Allow-Headers %q", h)
	}
	if m := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") {
		t.Fatalf("preflight Access-Control-Allow-Methods %q", m)
	}
}

func TestNIP86NoAdmins(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	if code, _ := nip86(t, r, relaytest.NewKey("anyone"), "supportedmethods"); code != 401 {
		t.Fatalf("no admins: %d", code)
	}
	if nips := nip11Doc(t, r)["supported_nips"].([]any); containsAny(nips, 86) {
		t.Fatalf("supported_nips %v lists 86 without admins", nips)
	}
}

// TestNIP86AdminsAsNpub: server.admins takes npub and nprofile as every
// pubkey list of the config does; the admin so named is let in, another
// key is not.
func TestNIP86AdminsAsNpub(t *testing.T) {
	t.Parallel()
	admin, other, alice := relaytest.NewKey("npub admin"), relaytest.NewKey("nprofile admin"), relaytest.NewKey("alice")
	prof, err := nip19.EncodeProfile(nip19.Profile{PubKey: other.PK, Relays: []string{"wss://relay.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{Admins: []string{nip19.EncodePubKey(admin.PK), prof}}})
	for _, k := range []relaytest.Key{admin, other} {
		if code, out := nip86(t, r, k, "banpubkey", alice.PK.Hex()); code != 200 || out["result"] != true {
			t.Fatalf("an admin named by npub or nprofile: %d %v", code, out)
		}
	}
	if code, _ := nip86(t, r, alice, "banpubkey", admin.PK.Hex()); code != 401 {
		t.Fatalf("a key that is not an admin: %d, want 401", code)
	}
}

// TestInfoPubKeyForms: [info] pubkey takes npub and nprofile, as the
// config's pubkey lists do, and NIP-11 shows it as hex (what clients
// read); one that is not a pubkey is refused at start, naming the key.
func TestInfoPubKeyForms(t *testing.T) {
	t.Parallel()
	op := relaytest.NewKey("operator")
	prof, err := nip19.EncodeProfile(nip19.Profile{PubKey: op.PK, Relays: []string{"wss://relay.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{op.PK.Hex(), nip19.EncodePubKey(op.PK), prof} {
		r := relaytest.Start(t, relaytest.Options{Info: relay.Info{PubKey: form}})
		if doc := nip11Doc(t, r); doc["pubkey"] != op.PK.Hex() {
			t.Fatalf("info.pubkey %s: NIP-11 pubkey %v, want the hex", form, doc["pubkey"])
		}
		r.Stop()
	}
	// Countries and language tags are shown in their canonical forms.
	r := relaytest.Start(t, relaytest.Options{Info: relay.Info{RelayCountries: []string{"us", "GBR", "*"}, LanguageTags: []string{"en_us", "PT-br"}}})
	doc := nip11Doc(t, r)
	if got := fmt.Sprint(doc["relay_countries"], doc["language_tags"]); got != "[US GB *] [en-US pt-BR]" {
		t.Fatalf("relay_countries and language_tags %s", got)
	}
	r.Stop()
	st, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := relay.New(relay.Config{}, relay.Options{Store: st, Info: relay.Info{PubKey: "npub1nope"}}); err == nil || !strings.Contains(err.Error(), `info: pubkey: not a public key (64 hex characters, npub or nprofile): "npub1nope"`) {
		t.Fatalf("a bad info.pubkey: %v", err)
	}
}

// slowSaves is a persister whose saves take a while, so that NIP-86
// changes made at once overlap.
type slowSaves struct{ policy.MemPersister }

func (p *slowSaves) Save(ctx context.Context, key string, value []byte) error {
	time.Sleep(20 * time.Millisecond)
	return p.MemPersister.Save(ctx, key, value)
}

func (p *slowSaves) Update(ctx context.Context, key string, f func([]byte, bool) ([]byte, error)) error {
	time.Sleep(20 * time.Millisecond)
	return p.MemPersister.Update(ctx, key, f)
}

// TestNIP86InfoChangesAtOnce: a name and a description changed at the
// same moment both stay, in the document and persisted. Each change read
// the information, persisted and set it: with saves that take a while
// the later one put back the name or description the earlier one had
// just changed.
func TestNIP86InfoChangesAtOnce(t *testing.T) {
	t.Parallel()
	admin := relaytest.NewKey("admin")
	p := &slowSaves{}
	opts := relaytest.Options{Server: server.Config{Admins: []string{admin.PK.Hex()}}, Persister: p}
	r := relaytest.Start(t, opts)
	for round := range 4 {
		name, desc := fmt.Sprintf("name %d", round), fmt.Sprintf("description %d", round)
		var wg sync.WaitGroup
		for _, c := range [][2]string{{"changerelayname", name}, {"changerelaydescription", desc}} {
			wg.Go(func() {
				if code, body := nip86(t, r, admin, c[0], c[1]); code != 200 || body["result"] != true {
					t.Errorf("%s: %d %v", c[0], code, body)
				}
			})
		}
		wg.Wait()
		if doc := nip11Doc(t, r); doc["name"] != name || doc["description"] != desc {
			t.Fatalf("round %d: NIP-11 has %q, %q; want %q, %q", round, doc["name"], doc["description"], name, desc)
		}
	}
	r.Stop()
	if doc := nip11Doc(t, relaytest.Start(t, opts)); doc["name"] != "name 3" || doc["description"] != "description 3" {
		t.Fatalf("after a restart: %v", doc)
	}
}

// TestNIP86AcrossNodes: two relays on one PostgreSQL schema (the nodes of
// a cluster), each reading the NIP-86 state again every 50 ms. A ban and
// a kind disallowed through one node refuse events on the other (and a
// connection authenticated as the banned pubkey there is closed); a
// change through the second node keeps what the first made (it is made
// to the lists as persisted); the relay's name changed through one is
// the other's; lifting the ban reaches the other too.
func TestNIP86AcrossNodes(t *testing.T) {
	t.Parallel()
	admin, alice, bob := relaytest.NewKey("cluster admin"), relaytest.NewKey("cluster alice"), relaytest.NewKey("cluster bob")
	sts := pgtest.Nodes(t, 2)
	var nodes []*relaytest.Relay
	for _, st := range sts {
		nodes = append(nodes, relaytest.Start(t, relaytest.Options{
			Store: st, Persister: policy.MetaPersister{Store: st}, PolicyRefresh: 50 * time.Millisecond,
			Server: server.Config{Admins: []string{admin.PK.Hex()}},
			Relay:  relay.Config{AuthOnConnect: true},
		}))
	}
	n1, n2 := nodes[0], nodes[1]
	dial := func(r *relaytest.Relay) *relaytest.Client {
		c := relaytest.Dial(t, r.URL)
		c.ExpectType("AUTH") // the challenge, unanswered
		return c
	}
	c2 := dial(n2)
	if m := c2.Publish(alice.Note("before")); !m.OK {
		t.Fatalf("before the ban: %s", describe(m))
	}
	authed := dialAuthed(t, n2, alice)

	call := func(r *relaytest.Relay, method string, params ...any) {
		t.Helper()
		if code, out := nip86(t, r, admin, method, params...); code != 200 || out["result"] != true {
			t.Fatalf("%s: %d %v", method, code, out)
		}
	}
	refused := func(c *relaytest.Client, ev *nostr.Event) bool {
		m := c.Publish(ev)
		return !m.OK && strings.HasPrefix(m.Message, "blocked:")
	}
	call(n1, "banpubkey", alice.PK.Hex(), "spam")
	waitFor(t, "the ban on the other node", func() bool { return refused(c2, alice.Note("after")) })
	authed.WaitClosed(relaytest.DefaultTimeout)
	// A change through node 2 is made to the lists as persisted: the ban
	// made through node 1 stays.
	call(n2, "disallowkind", 7)
	waitFor(t, "kind 7 disallowed on node 1", func() bool {
		return refused(dial(n1), bob.Event(7, "+", nil, time.Now().Unix()))
	})
	c1 := dial(n1)
	if !refused(c1, alice.Note("still banned")) || !refused(c2, alice.Note("still banned")) {
		t.Fatal("the ban made through node 1 was lost to node 2's change")
	}
	call(n1, "changerelayname", "cluster")
	waitFor(t, "the name on node 2", func() bool { return nip11Doc(t, n2)["name"] == "cluster" })
	call(n2, "unbanpubkey", alice.PK.Hex())
	waitFor(t, "the ban lifted on node 1", func() bool { return c1.Publish(alice.Note("lifted")).OK })
}

// TestNIP86InfoFieldsApart: a field changed through NIP-86 overrides the
// configuration's [info] from then on; the fields never changed that way
// keep following the configuration, at a reload and at a restart; a field
// set to the value it has is set all the same. (The
// three were persisted together, so a description changed through NIP-86
// froze the name the file had then.) A document persisted before, with
// all three, still overrides all three.
func TestNIP86InfoFieldsApart(t *testing.T) {
	t.Parallel()
	admin := relaytest.NewKey("admin")
	p := &policy.MemPersister{}
	opts := relaytest.Options{Server: server.Config{Admins: []string{admin.PK.Hex()}}, Persister: p,
		Info: relay.Info{Name: "file name", Description: "file description"}}
	r := relaytest.Start(t, opts)
	if code, out := nip86(t, r, admin, "changerelaydescription", "admin's description"); code != 200 || out["result"] != true {
		t.Fatalf("changerelaydescription: %d %v", code, out)
	}
	check := func(when string, doc map[string]any, name, desc string) {
		t.Helper()
		if doc["name"] != name || doc["description"] != desc {
			t.Fatalf("%s: name %q, description %q; want %q, %q", when, doc["name"], doc["description"], name, desc)
		}
	}
	check("after the change", nip11Doc(t, r), "file name", "admin's description")
	if err := r.Relay.ReloadInfo(relay.Info{Name: "file name 2", Description: "file description 2"}); err != nil {
		t.Fatal(err)
	}
	check("after a reload", nip11Doc(t, r), "file name 2", "admin's description")
	r.Stop()
	opts.Info.Name = "file name 3"
	r = relaytest.Start(t, opts)
	check("after a restart", nip11Doc(t, r), "file name 3", "admin's description")
	// A name set through NIP-86 to what it is now is the admin's too.
	if code, out := nip86(t, r, admin, "changerelayname", "file name 3"); code != 200 || out["result"] != true {
		t.Fatalf("changerelayname: %d %v", code, out)
	}
	if err := r.Relay.ReloadInfo(relay.Info{Name: "file name 4"}); err != nil {
		t.Fatal(err)
	}
	check("after a name set as it was", nip11Doc(t, r), "file name 3", "admin's description")
	r.Stop()
	if err := p.Save(context.Background(), "relay/info", []byte(`{"name":"old name","description":"old description","icon":""}`)); err != nil {
		t.Fatal(err)
	}
	check("with an earlier document", nip11Doc(t, relaytest.Start(t, opts)), "old name", "old description")
}

// TestNIP86AtOnceAcrossNodes: two admins working at the same moment
// through the two nodes of a cluster (one PostgreSQL schema): the bans
// made through each, and the name changed through one while the
// description is changed through the other, all stay, on both nodes and
// after a restart. Each change is made to the state as persisted, in one
// transaction (UpdateMeta); a node that read, changed and saved lost
// what the other node saved in between.
func TestNIP86AtOnceAcrossNodes(t *testing.T) {
	t.Parallel()
	admin := relaytest.NewKey("cluster admin")
	sts := pgtest.Nodes(t, 2)
	opts := func(st *postgres.Store) relaytest.Options {
		return relaytest.Options{
			Store: st, Persister: policy.MetaPersister{Store: st}, PolicyRefresh: 50 * time.Millisecond,
			Server: server.Config{Admins: []string{admin.PK.Hex()}},
		}
	}
	var nodes []*relaytest.Relay
	for _, st := range sts {
		nodes = append(nodes, relaytest.Start(t, opts(st)))
	}
	const each = 8
	var wg sync.WaitGroup
	for n, r := range nodes {
		field := []string{"changerelayname", "changerelaydescription"}[n]
		wg.Go(func() {
			for i := range each {
				pk := relaytest.NewKey(fmt.Sprintf("spammer %d.%d", n, i)).PK.Hex()
				for _, c := range [][2]string{{"banpubkey", pk}, {field, fmt.Sprintf("%s %d", field, i)}} {
					if code, out := nip86(t, r, admin, c[0], c[1]); code != 200 || out["result"] != true {
						t.Errorf("%s through node %d: %d %v", c[0], n+1, code, out)
					}
				}
			}
		})
	}
	wg.Wait()
	want := func(r *relaytest.Relay) bool {
		_, out := nip86(t, r, admin, "listbannedpubkeys")
		banned, _ := out["result"].([]any)
		doc := nip11Doc(t, r)
		return len(banned) == 2*each && doc["name"] == fmt.Sprintf("changerelayname %d", each-1) &&
			doc["description"] == fmt.Sprintf("changerelaydescription %d", each-1)
	}
	for n, r := range nodes {
		waitFor(t, fmt.Sprintf("node %d to hold every change", n+1), func() bool { return want(r) })
	}
	nodes[0].Stop()
	if r := relaytest.Start(t, opts(sts[0])); !want(r) {
		_, out := nip86(t, r, admin, "listbannedpubkeys")
		t.Fatalf("after a restart: %d banned, NIP-11 %v", len(out["result"].([]any)), nip11Doc(t, r))
	}
}
