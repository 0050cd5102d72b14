package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
	"github.com/petrel-relay/petrel/internal/store/postgres"
)

// migrateHistory fills st with events whose storage rules leave
// tombstones of every kind, including one whose deletion request is gone
// (removed by an operator's Delete), and NIP-86 state. It returns the
// events the store must refuse as Deleted afterwards (and any copy of
// it), and an older replaceable version it must refuse as Superseded.
func migrateHistory(t *testing.T, st store.Store) (deleted []*nostr.Event, superseded *nostr.Event) {
	t.Helper()
	ctx := context.Background()
	x, y, z, w := relaytest.NewKey("mig-x"), relaytest.NewKey("mig-y"), relaytest.NewKey("mig-z"), relaytest.NewKey("mig-w")
	save := func(evs ...*nostr.Event) {
		t.Helper()
		res, err := st.Save(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Outcome != store.Stored {
				t.Fatalf("history event %d (kind %d): %v", i, evs[i].Kind, r.Outcome)
			}
		}
	}
	// Enough plain notes for several batches, with created_at ties.
	var notes []*nostr.Event
	for i := range 2500 {
		notes = append(notes, z.Event(1, fmt.Sprintf("note %d", i), nostr.Tags{{"t", "migrate"}}, fixtureBase+int64(i/3)))
	}
	save(notes...)
	n1, n2 := x.Event(1, "kept", nil, fixtureBase+1), x.Event(1, "deleted", nil, fixtureBase+2)
	future := x.Event(1, "deleted before it came", nil, fixtureBase+5000)
	p1, p2 := x.Event(0, `{"name":"old"}`, nil, fixtureBase+1), x.Event(0, `{"name":"new"}`, nil, fixtureBase+2)
	a1 := x.Event(30023, "first", nostr.Tags{{"d", "post"}}, fixtureBase+10)
	save(n1, n2, p1, a1)
	save(p2)
	save(x.Event(5, "", nostr.Tags{{"e", n2.ID.Hex()}, {"e", future.ID.Hex()}, {"a", "30023:" + x.PK.Hex() + ":post"}}, fixtureBase+20))
	a2 := x.Event(30023, "second", nostr.Tags{{"d", "post"}}, fixtureBase+30)
	y1 := y.Event(1, "before vanishing", nil, fixtureBase+5)
	wrap := z.Event(1059, "sealed", nostr.Tags{{"p", y.PK.Hex()}}, fixtureBase+40)
	save(a2, y1, wrap)
	save(y.Event(62, "", nostr.Tags{{"relay", "ALL_RELAYS"}}, fixtureBase+50))
	save(y.Event(1, "after vanishing", nil, fixtureBase+60))
	// A deletion request an operator removed: its tombstone stays.
	w1 := w.Event(1, "deleted by w", nil, fixtureBase+3)
	save(w1)
	req := w.Event(5, "", nostr.Tags{{"e", w1.ID.Hex()}}, fixtureBase+4)
	save(req)
	if n, err := st.Delete(ctx, []nostr.ID{req.ID}); err != nil || n != 1 {
		t.Fatalf("operator delete: %d %v", n, err)
	}
	// Expired events are not copied; unexpired ones are.
	save(x.Event(1, "expired", nostr.Tags{{"expiration", "1000"}}, fixtureBase+7),
		x.Event(1, "expires later", nostr.Tags{{"expiration", fmt.Sprint(time.Now().Unix() + 3600)}}, fixtureBase+8))
	m := st.(migrateMeta)
	for _, name := range []string{"policy/banned_pubkeys", "relay/info"} {
		if err := m.SaveMeta(ctx, name, []byte(`{"version":1,"name":"`+name+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	oldAddr := x.Event(30023, "older", nostr.Tags{{"d", "post"}}, fixtureBase+15)
	vanishedWrap := z.Event(1059, "another", nostr.Tags{{"p", y.PK.Hex()}}, fixtureBase+45)
	return []*nostr.Event{n2, future, a1, oldAddr, y1, wrap, vanishedWrap, w1}, p1
}

// storeState is what a migration must carry over, read from a store:
// its items, raw events (newest first), tombstones and named blobs.
type storeState struct {
	items []store.Item
	raws  []string
	tombs []string
	meta  map[string]string
}

func readState(t *testing.T, st store.Store) storeState {
	t.Helper()
	ctx := context.Background()
	var s storeState
	var err error
	if s.items, err = st.Items(ctx, []nostr.Filter{{}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := queryEach(ctx, st, []nostr.Filter{{}}, func(r *store.Record) error {
		s.raws = append(s.raws, string(r.Raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.(store.Tombstoner).Tombstones(ctx, func(tb *store.Tombstone) error {
		s.tombs = append(s.tombs, fmt.Sprintf("%s@%d", tb.Key(), tb.CreatedAt))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.tombs)
	m := st.(migrateMeta)
	names, err := m.MetaNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.meta = map[string]string{}
	for _, n := range names {
		v, err := m.LoadMeta(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		s.meta[n] = string(v)
	}
	return s
}

func (s storeState) equal(o storeState) error {
	switch {
	case !slices.Equal(s.items, o.items):
		return fmt.Errorf("items differ: %d and %d", len(s.items), len(o.items))
	case !slices.Equal(s.raws, o.raws):
		return fmt.Errorf("events differ: %d and %d", len(s.raws), len(o.raws))
	case !slices.Equal(s.tombs, o.tombs):
		return fmt.Errorf("tombstones differ: %d and %d", len(s.tombs), len(o.tombs))
	case len(s.meta) != len(o.meta):
		return fmt.Errorf("named blobs differ: %v and %v", s.meta, o.meta)
	}
	for k, v := range s.meta {
		if o.meta[k] != v {
			return fmt.Errorf("named blob %q differs", k)
		}
	}
	return nil
}

// checkRefuses checks that st refuses deleted as Deleted and superseded
// as Superseded.
func checkRefuses(t *testing.T, st store.Store, deleted []*nostr.Event, superseded *nostr.Event) {
	t.Helper()
	res, err := st.Save(context.Background(), append(slices.Clone(deleted), superseded))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:len(deleted)] {
		if r.Outcome != store.Deleted {
			t.Fatalf("deleted event %d (kind %d, %q): %v, want deleted", i, deleted[i].Kind, deleted[i].Content, r.Outcome)
		}
	}
	if r := res[len(deleted)]; r.Outcome != store.Superseded {
		t.Fatalf("superseded version: %v", r.Outcome)
	}
}

// TestMigrateRoundTrip: pebble -> postgres -> pebble keeps every event
// byte for byte, every tombstone (one of them without its deletion
// request) and the NIP-86 state, and each copy refuses what the
// original refuses.
func TestMigrateRoundTrip(t *testing.T) {
	// Small memtables, so that the copy into pebble fills several and
	// pebble keeps their logs for reuse (which the migration drops).
	const memtable = 256 << 10
	t.Setenv("PETREL_STORE_MEMTABLE_BYTES", fmt.Sprint(memtable))
	schema := pgSchema(t)
	dir := filepath.Join(t.TempDir(), "data")
	src := openStoreAt(t, dir)
	deleted, superseded := migrateHistory(t, src)
	want := readState(t, src)
	if len(want.tombs) != 5 || len(want.meta) != 2 || len(want.items) != 2500+7 {
		t.Fatalf("the history left %d events, %d tombstones, %d blobs", len(want.items), len(want.tombs), len(want.meta))
	}
	// Two events held unverified (a relay in optimistic mode answered
	// them OK:true): a valid one and a forged one, copied as held both
	// ways, never counted as events.
	hk := relaytest.NewKey("mig-held")
	heldOK := hk.Event(1, "held", nil, fixtureBase+7000)
	heldBad := hk.Event(1, "held, forged", nil, fixtureBase+7001)
	heldBad.Sig[0] ^= 1
	heldBad.Raw = nostr.Serialize(heldBad)
	holdAll(t, src, heldOK, heldBad)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	pgSpec := "postgres:" + pgtest.URL() + "#" + schema
	out, _, err := runTool(t, migrateCmd, "", "--from", "pebble:"+dir, "--to", pgSpec, "-q", "--batch", "700")
	if err != nil {
		t.Fatalf("pebble -> postgres: %v\n%s", err, out)
	}
	if !strings.Contains(out, "copied 2507 events") || !strings.Contains(out, "stored 2507, already there 0, refused 0") {
		t.Fatalf("summary:\n%s", out)
	}
	if !strings.Contains(out, "3 deleted ids, 1 deleted addresses, 1 vanished authors; policy state: 2 entries") || !strings.Contains(out, "verified: the destination holds 2507 events (the source 2507)") {
		t.Fatalf("summary:\n%s", out)
	}
	if strings.Contains(out, "test?") || strings.Contains(out, "sslmode") {
		t.Fatalf("the summary prints the URL's query:\n%s", out)
	}
	if !strings.Contains(out, "held unverified (verify_mode optimistic): 2 events") {
		t.Fatalf("summary does not report the held events:\n%s", out)
	}
	pgStore := openPG(t, schema)
	if err := readState(t, pgStore).equal(want); err != nil {
		t.Fatalf("postgres copy: %v", err)
	}
	checkHeld(t, pgStore, heldOK, heldBad)
	pgStore.Close()

	back := filepath.Join(t.TempDir(), "back")
	out, _, err = runTool(t, migrateCmd, "", "--from", pgSpec, "--to", "pebble:"+back, "--json")
	if err != nil {
		t.Fatalf("postgres -> pebble: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"verified":true`) || !strings.Contains(out, `"events":2507`) || !strings.Contains(out, `"deleted_ids":3`) {
		t.Fatalf("--json: %s", out)
	}
	if !strings.Contains(out, `"held":2`) {
		t.Fatalf("--json does not report the held events: %s", out)
	}
	checkNoRecycledLogs(t, back, memtable)
	again := openStoreAt(t, back)
	if err := readState(t, again).equal(want); err != nil {
		t.Fatalf("pebble copy of the postgres copy: %v", err)
	}
	checkHeld(t, again, heldOK, heldBad)
	checkRefuses(t, again, deleted, superseded)
	pgStore = openPG(t, schema)
	checkRefuses(t, pgStore, deleted, superseded)
	// And they accept what comes after.
	k := relaytest.NewKey("mig-after")
	saveAll(t, pgStore, []*nostr.Event{k.Event(1, "after the migration", nil, fixtureBase+9000)})
}

// holdAll holds evs unverified in st.
func holdAll(t *testing.T, st store.Store, evs ...*nostr.Event) {
	t.Helper()
	u := st.(store.Unverified)
	for _, ev := range evs {
		c := make(chan store.SaveResult, 1)
		if err := u.SubmitUnverified(context.Background(), ev, func(r store.SaveResult) { c <- r }); err != nil {
			t.Fatal(err)
		}
		if r := <-c; r.Outcome != store.Held {
			t.Fatalf("hold: %v (%v)", r.Outcome, r.Err)
		}
	}
}

// checkHeld fails unless st holds exactly want unverified (by id and
// signature).
func checkHeld(t *testing.T, st store.Store, want ...*nostr.Event) {
	t.Helper()
	got := map[string]bool{}
	err := st.(store.Unverified).Unverified(context.Background(), func(ev *nostr.Event) error {
		got[string(ev.Raw)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d held events, want %d", len(got), len(want))
	}
	for _, ev := range want {
		if !got[string(ev.Raw)] {
			t.Fatalf("held event %.12s not copied", ev.ID.Hex())
		}
	}
}

// TestMigrateRefuses: a destination that is not empty needs --force
// (which then skips what is there), the same store on both sides, a
// missing source and a malformed name are refused.
func TestMigrateRefuses(t *testing.T) {
	schema := pgSchema(t)
	pgSpec := "postgres:" + pgtest.URL() + "#" + schema
	evs := toolEvents()
	data := fillStore(t, evs[:30])
	f := func(want string, args ...string) {
		t.Helper()
		_, _, err := runTool(t, migrateCmd, "", args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: error %v, want %q", args, err, want)
		}
	}
	f("same store", "--from", "pebble:"+data, "--to", "pebble:"+data+"/")
	f("same store", "--from", pgSpec, "--to", pgSpec)
	// The same directory under another name (it failed on the first
	// open's lock, "is petrel serve running?").
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	f("same store", "--from", "pebble:"+data, "--to", "pebble:"+link)
	f("no store in the data directory", "--from", "pebble:"+filepath.Join(t.TempDir(), "none"), "--to", pgSpec)
	f("no petrel store in this PostgreSQL schema", "--from", "postgres:"+pgtest.URL()+"#"+schema+"_none", "--to", "pebble:"+filepath.Join(t.TempDir(), "x"))
	f("want pebble:DIR or postgres:URL", "--from", "sqlite:x", "--to", pgSpec)
	f("schema", "--from", "pebble:"+data, "--to", "postgres:"+pgtest.URL()+"#bad-name")
	f(`required flag(s) "to" not set`, "--from", "pebble:"+data)
	if schemaExists(t, schema) || schemaExists(t, schema+"_none") {
		t.Fatal("a refused migrate created a schema")
	}

	// Into a store that holds some of the events: refused, then with
	// --force the rest is copied and what was there stays.
	pgStore := openPG(t, schema)
	saveAll(t, pgStore, evs[20:])
	pgStore.Close()
	f("the destination is not empty: it holds 20 events, 0 tombstones and 0 policy entries", "--from", "pebble:"+data, "--to", pgSpec)
	out, _, err := runTool(t, migrateCmd, "", "--from", "pebble:"+data, "--to", pgSpec, "--force", "-q")
	if err != nil || !strings.Contains(out, "stored 20, already there 10, refused 0") || !strings.Contains(out, "verified: the destination holds 40 events (the source 30)") {
		t.Fatalf("--force: %v\n%s", err, out)
	}
}

func TestParseStoreSpec(t *testing.T) {
	cfg := configForSpecs()
	f := func(s string, want storeSpec, wantErr string) {
		t.Helper()
		got, err := parseStoreSpec(s, cfg)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("%q: error %v, want %q", s, err, wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("%q: the error shows the password: %v", s, err)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("%q: %+v %v, want %+v", s, got, err, want)
		}
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	f("pebble:/var/lib/petrel/data", storeSpec{Backend: "pebble", Path: "/var/lib/petrel/data"}, "")
	f("pebble:rel/dir", storeSpec{Backend: "pebble", Path: abs("rel/dir")}, "")
	f("pebble", storeSpec{Backend: "pebble", Path: abs("cfg-data")}, "")
	f("pebble:", storeSpec{Backend: "pebble", Path: abs("cfg-data")}, "")
	f("postgres", storeSpec{Backend: "postgres", URL: "postgres://cfg@db/relay", Schema: "cfgschema"}, "")
	f("postgres:#other", storeSpec{Backend: "postgres", URL: "postgres://cfg@db/relay", Schema: "other"}, "")
	f("postgres:postgres://u:pw@h:5432/db?sslmode=disable", storeSpec{Backend: "postgres", URL: "postgres://u:pw@h:5432/db?sslmode=disable", Schema: "cfgschema"}, "")
	f("postgres://u@h/db#s1", storeSpec{Backend: "postgres", URL: "postgres://u@h/db", Schema: "s1"}, "")
	f("postgresql://u@h/db", storeSpec{Backend: "postgres", URL: "postgresql://u@h/db", Schema: "cfgschema"}, "")
	f("postgres:host=h dbname=d#s_2", storeSpec{Backend: "postgres", URL: "host=h dbname=d", Schema: "s_2"}, "")
	f("postgres://u:secret@h/db#1x", storeSpec{}, "schema")
	f("postgres://u@h/db#", storeSpec{Backend: "postgres", URL: "postgres://u@h/db", Schema: "cfgschema"}, "")
	f("mysql://u:secret@h/db", storeSpec{}, "want pebble:DIR or postgres:URL")
	f("/srv/petrel", storeSpec{}, `"/srv/petrel": say which store: pebble:/srv/petrel for a directory, or postgres:URL[#schema]`)
	cfg.Store.PostgresURL = ""
	f("postgres", storeSpec{}, "store.postgres_url")

	f2 := func(s, want string) {
		t.Helper()
		if got := redactURL(s); got != want {
			t.Fatalf("redactURL(%q) = %q, want %q", s, got, want)
		}
	}
	f2("postgres://u:secret@h:5432/db?sslmode=disable&password=x", "postgres://u@h:5432/db")
	f2("host=h port=5 dbname=d user=u password=secret sslmode=require", "host=h port=5 dbname=d user=u")
}

// TestMigrateEmptySource: an empty source copies nothing, and still
// verifies (and copies the named blobs of a store without events).
func TestMigrateEmptySource(t *testing.T) {
	schema := pgSchema(t)
	dir := filepath.Join(t.TempDir(), "empty")
	st := openStoreAt(t, dir)
	if err := st.SaveMeta(context.Background(), "relay/info", []byte("x")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, _, err := runTool(t, migrateCmd, "", "--from", "pebble:"+dir, "--to", "postgres:"+pgtest.URL()+"#"+schema)
	if err != nil || !strings.Contains(out, "copied 0 events") || !strings.Contains(out, "policy state: 1 entries") || !strings.Contains(out, "verified") {
		t.Fatalf("%v\n%s", err, out)
	}
	v, err := openPG(t, schema).LoadMeta(context.Background(), "relay/info")
	if err != nil || !bytes.Equal(v, []byte("x")) {
		t.Fatalf("blob: %q %v", v, err)
	}
}

// configForSpecs is the config parseStoreSpec fills the gaps from.
func configForSpecs() config.Config {
	var c config.Config
	c.Store.Path = "cfg-data"
	c.Store.PostgresURL = "postgres://cfg@db/relay"
	c.Store.PostgresSchema = "cfgschema"
	return c
}

// FuzzParseStoreSpec: any name either parses into a store petrel can
// open (a known backend, an absolute path or a URL and a valid schema)
// or is refused, and a refusal never shows a URL's password.
func FuzzParseStoreSpec(f *testing.F) {
	for _, s := range []string{"pebble:/x", "pebble", "postgres", "postgres:#s", "postgres://u:secret@h/db#s",
		"postgresql://u:secret@h/db", "postgres:host=h password=secret#x", "postgres://u:secret@h/db#1bad", "x:y", ""} {
		f.Add(s)
	}
	cfg := configForSpecs()
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := parseStoreSpec(s, cfg)
		if err != nil {
			// The password of a URL, when it appears nowhere else.
			if u, perr := url.Parse(strings.TrimPrefix(strings.TrimPrefix(s, "postgresql:"), "postgres:")); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Count(s, pw) == 1 && strings.Contains(err.Error(), pw) {
					t.Fatalf("%q: the error shows the password: %v", s, err)
				}
			}
			return
		}
		switch sp.Backend {
		case "pebble":
			if !filepath.IsAbs(sp.Path) {
				t.Fatalf("%q: relative path %q", s, sp.Path)
			}
		case "postgres":
			if sp.URL == "" || !postgres.ValidSchemaName(sp.Schema) {
				t.Fatalf("%q: %+v", s, sp)
			}
		default:
			t.Fatalf("%q: backend %q", s, sp.Backend)
		}
	})
}

// cancelInSave is a destination whose nth Save is interrupted while it
// commits: the batch it took is saved and answered (store.Store), and the
// run is cancelled meanwhile.
type cancelInSave struct {
	*pebble.Store
	n, saves int
	cancel   context.CancelFunc
}

func (s *cancelInSave) Save(ctx context.Context, events []*nostr.Event) ([]store.SaveResult, error) {
	res, err := s.Store.Save(ctx, events) // taken with ctx live
	if s.saves++; s.saves == s.n {
		s.cancel() // lands while the batch commits
	}
	return res, err
}

// TestMigrateInterruptedCount: an interrupted copy reports what the
// destination holds, the batch committed as the interrupt landed
// included, and saves no batch after it.
func TestMigrateInterruptedCount(t *testing.T) {
	src := openStoreAt(t, filepath.Join(t.TempDir(), "src"))
	z := relaytest.NewKey("mig-cut")
	var evs []*nostr.Event
	for i := range 1000 {
		evs = append(evs, z.Event(1, fmt.Sprintf("note %d", i), nil, fixtureBase+int64(i)))
	}
	if _, err := src.Save(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dstStore := openStoreAt(t, filepath.Join(t.TempDir(), "dst"))
	dst := &cancelInSave{Store: dstStore, n: 3, cancel: cancel}
	res, err := migrateStores(ctx, src, dst, migrateOptions{Batch: 100})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted copy: %v", err)
	}
	n, cerr := dstStore.Count(context.Background(), []nostr.Filter{{}})
	if cerr != nil || n != 300 || res.Stored != n || res.Events != n || dst.saves != 3 {
		t.Fatalf("the destination holds %d (%v) after %d saves; the result says %d copied, %d stored", n, cerr, dst.saves, res.Events, res.Stored)
	}
	if res.Seconds <= 0 || !strings.Contains(res.String(), "copied 300 events") {
		t.Fatalf("summary: %s", res.String())
	}
}
