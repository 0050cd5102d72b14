package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

var ctx = context.Background()

func keyN(n int) nostr.SecretKey { return nostr.SecretKeyFromSeed([]byte(fmt.Sprintf("key %d", n))) }

func pkN(n int) nostr.PubKey { return keyN(n).PubKey() }

func newTestLists(t testing.TB, cfg Config, p Persister) *Lists {
	t.Helper()
	l, err := NewLists(ctx, cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func rejText(r *nostr.Rejection) string {
	if r == nil {
		return ""
	}
	return r.Error()
}

func TestCheckEvent(t *testing.T) {
	l := newTestLists(t, Config{}, nil)
	f := func(ev *nostr.Event, want string) {
		t.Helper()
		if got := rejText(l.CheckEvent(ev)); got != want {
			t.Fatalf("kind %d by %s: %q, want %q", ev.Kind, ev.PubKey.Hex()[:8], got, want)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := keyN(1), keyN(2), keyN(3)
	evA := testEventBy(a, 1, "a")
	evB := testEventBy(b, 1, "b")
	evC7 := testEventBy(c, 7, "c")
	const (
		bannedPK  = "blocked: this pubkey is banned from this relay"
		notAllow  = "blocked: this pubkey is not allowed to publish on this relay"
		bannedEv  = "blocked: this event is banned from this relay"
		kindSeven = "blocked: events of kind 7 are not accepted on this relay"
		kindOne   = "blocked: events of kind 1 are not accepted on this relay"
	)
	f(evA, "")
	must(l.BanPubKey(ctx, a.PubKey(), "spam"))
	f(evA, bannedPK)
	f(evB, "")
	must(l.AllowPubKey(ctx, b.PubKey(), "friend")) // allow list now active
	f(evB, "")
	f(evC7, notAllow)
	f(evA, bannedPK)
	must(l.AllowPubKey(ctx, a.PubKey(), "")) // removes the ban
	f(evA, "")
	must(l.BanPubKey(ctx, a.PubKey(), "")) // removes the allowance
	f(evA, bannedPK)
	if got := l.AllowedPubKeys(); len(got) != 1 || got[0].PubKey != b.PubKey() || got[0].Reason != "friend" {
		t.Fatalf("allowed %+v", got)
	}
	must(l.UnbanPubKey(ctx, a.PubKey()))
	must(l.UnallowPubKey(ctx, b.PubKey())) // allow list empty again
	f(evA, "")
	f(evC7, "")

	must(l.BanEvent(ctx, evB.ID, "bad"))
	f(evB, bannedEv)
	must(l.AllowEvent(ctx, evB.ID, "ok after all"))
	f(evB, "")
	if len(l.BannedEvents()) != 0 || len(l.AllowedEvents()) != 1 {
		t.Fatalf("events: banned %v allowed %v", l.BannedEvents(), l.AllowedEvents())
	}
	// An allowed event passes every list check.
	must(l.BanPubKey(ctx, b.PubKey(), ""))
	f(evB, "")
	must(l.UnallowEvent(ctx, evB.ID))
	f(evB, bannedPK)
	must(l.UnbanPubKey(ctx, b.PubKey()))
	must(l.BanEvent(ctx, evB.ID, ""))
	must(l.UnbanEvent(ctx, evB.ID))
	f(evB, "")

	must(l.DisallowKind(ctx, 7))
	f(evC7, kindSeven)
	f(evA, "")
	must(l.AllowKind(ctx, 1)) // allow list of kinds now active
	f(evA, "")
	f(evC7, kindSeven)
	must(l.AllowKind(ctx, 7)) // moves 7 from disallowed to allowed
	f(evC7, "")
	must(l.DisallowKind(ctx, 1))
	f(evA, kindOne)
	if got, want := l.AllowedKinds(), []int{7}; !slices.Equal(got, want) {
		t.Fatalf("allowed kinds %v", got)
	}
	if got, want := l.DisallowedKinds(), []int{1}; !slices.Equal(got, want) {
		t.Fatalf("disallowed kinds %v", got)
	}
	if err := l.AllowKind(ctx, 65536); !errors.Is(err, ErrInvalid) {
		t.Fatalf("kind 65536: %v", err)
	}
	if err := l.DisallowKind(ctx, -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("kind -1: %v", err)
	}
}

func TestCheckIP(t *testing.T) {
	l := newTestLists(t, Config{BlockedIPs: []string{"198.51.100.0/24"}}, nil)
	f := func(ip string, blocked bool) {
		t.Helper()
		var a netip.Addr
		if ip != "" {
			a = netip.MustParseAddr(ip)
		}
		if got := l.CheckIP(a) != nil; got != blocked {
			t.Fatalf("%s: blocked %v, want %v", ip, got, blocked)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f("", false)
	f("198.51.100.7", true) // static prefix
	f("::ffff:198.51.100.7", true)
	f("198.51.101.7", false)
	must(l.BlockIP(ctx, "203.0.113.5", "abuse"))
	f("203.0.113.5", true)
	f("203.0.113.6", false)
	must(l.BlockIP(ctx, "2001:db8:1::/48", ""))
	f("2001:db8:1:2::3", true)
	f("2001:db8:2::1", false)
	must(l.BlockIP(ctx, "::ffff:192.0.2.0/120", "")) // mapped: stored as 192.0.2.0/24
	f("192.0.2.200", true)
	must(l.BlockIP(ctx, "10.1.2.3/8", "")) // host bits cleared
	f("10.200.0.1", true)
	must(l.BlockIP(ctx, "fe80::1%eth0", "")) // zone dropped
	f("fe80::1", true)
	want := []string{"10.0.0.0/8", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.5", "2001:db8:1::/48", "fe80::1"}
	var got []string
	for _, e := range l.BlockedIPs() {
		got = append(got, e.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("blocked %v, want %v", got, want)
	}
	// Unblocking an address inside a prefix changes nothing; the exact
	// entry must be named.
	must(l.UnblockIP(ctx, "10.200.0.1"))
	f("10.200.0.1", true)
	must(l.UnblockIP(ctx, "10.0.0.0/8"))
	f("10.200.0.1", false)
	if err := l.UnblockIP(ctx, "198.51.100.0/24"); !errors.Is(err, ErrStatic) {
		t.Fatalf("unblock static: %v", err)
	}
	for _, bad := range []string{"", "banana", "1.2.3.4/33", "1.2.3", "::ffff:1.2.3.4/80"} {
		if err := l.BlockIP(ctx, bad, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("BlockIP(%q): %v", bad, err)
		}
	}
}

func TestListsStaticLayer(t *testing.T) {
	a, b := pkN(1), pkN(2)
	cfg := Config{
		BannedPubKeys:   []string{a.Hex()},
		AllowedPubKeys:  []string{b.Hex()},
		AllowedKinds:    []int{1},
		DisallowedKinds: []int{4},
	}
	l := newTestLists(t, cfg, nil)
	f := func(err error, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	f(l.UnbanPubKey(ctx, a), ErrStatic)
	f(l.AllowPubKey(ctx, a, ""), ErrStatic) // would have to remove the static ban
	f(l.UnallowPubKey(ctx, b), ErrStatic)
	f(l.AllowKind(ctx, 4), ErrStatic)
	// Bans and disallowances win over static allowances and succeed.
	f(l.BanPubKey(ctx, b, "compromised"), nil)
	if rej := l.CheckEvent(testEventBy(keyN(2), 1, "x")); rej != rejPubKeyBanned {
		t.Fatalf("static-allowed but banned: %v", rej)
	}
	f(l.DisallowKind(ctx, 1), nil)
	if rej := l.CheckEvent(testEventBy(keyN(5), 1, "x")); rej == nil {
		t.Fatal("kind 1 disallowed but accepted")
	}
	banned := l.BannedPubKeys()
	if len(banned) != 2 {
		t.Fatalf("banned %+v", banned)
	}
	for _, e := range banned {
		if (e.PubKey == a) != e.Static {
			t.Fatalf("entry %+v: wrong Static", e)
		}
	}
	// A NIP-86 ban of what the file already bans is recorded too (listed
	// once, as the file's), so it stays when the file's entry goes.
	p := &MemPersister{}
	l = newTestLists(t, cfg, p)
	f(l.BanPubKey(ctx, a, "again"), nil)
	if _, err := p.Load(ctx, KeyBannedPubKeys); err != nil {
		t.Fatalf("a ban of what the file bans was not persisted: %v", err)
	}
	if banned := l.BannedPubKeys(); len(banned) != 1 || !banned[0].Static {
		t.Fatalf("banned %+v, want a once, as the file's", banned)
	}
	f(l.UnbanPubKey(ctx, a), ErrStatic)
	if err := l.SetStatic(Config{}); err != nil {
		t.Fatal(err)
	}
	if banned := l.BannedPubKeys(); len(banned) != 1 || banned[0].Static || banned[0].Reason != "again" {
		t.Fatalf("after the file's ban went: %+v, want NIP-86's", banned)
	}
	f(l.UnbanPubKey(ctx, a), nil)
	if l.CheckEvent(testEventBy(keyN(1), 1, "x")) != nil {
		t.Fatal("still banned after unbanpubkey")
	}
}

// TestListsSetStatic: a reload replaces the configuration's layer of
// every list (bans, allowances, kinds, blocked addresses: the lookups'
// bitmaps and prefix maps rebuilt) and keeps the NIP-86 layer; nothing is
// persisted; a malformed value changes nothing.
func TestListsSetStatic(t *testing.T) {
	p := &MemPersister{}
	l := newTestLists(t, Config{BannedPubKeys: []string{pkN(1).Hex()}, DisallowedKinds: []int{4}, BlockedIPs: []string{"10.0.0.0/8"}}, p)
	if err := l.BanPubKey(ctx, pkN(2), "by NIP-86"); err != nil {
		t.Fatal(err)
	}
	if err := l.BlockIP(ctx, "192.0.2.1", "by NIP-86"); err != nil {
		t.Fatal(err)
	}
	saved, _ := p.Load(ctx, KeyBannedPubKeys)
	check := func(n, kind int, want string) {
		t.Helper()
		if got := rejText(l.CheckEvent(testEventBy(keyN(n), kind, "x"))); got != want {
			t.Fatalf("kind %d by key %d: %q, want %q", kind, n, got, want)
		}
	}
	ip := func(a string, blocked bool) {
		t.Helper()
		if got := l.CheckIP(netip.MustParseAddr(a)) != nil; got != blocked {
			t.Fatalf("%s blocked %v, want %v", a, got, blocked)
		}
	}
	banned := rejPubKeyBanned.Error()
	check(1, 1, banned)
	check(3, 4, "blocked: events of kind 4 are not accepted on this relay")
	ip("10.1.2.3", true)

	err := l.SetStatic(Config{BannedPubKeys: []string{pkN(3).Hex()}, AllowedKinds: []int{1, 7}, BlockedIPs: []string{"2001:db8::/32"}})
	if err != nil {
		t.Fatal(err)
	}
	check(1, 1, "")                                                         // off the file's list
	check(2, 1, banned)                                                     // the NIP-86 ban stays
	check(3, 1, banned)                                                     // on the file's list now
	check(4, 4, "blocked: events of kind 4 are not accepted on this relay") // only 1 and 7 now
	check(4, 7, "")
	ip("10.1.2.3", false)
	ip("192.0.2.1", true) // the NIP-86 block stays
	ip("2001:db8::1", true)
	for _, e := range l.BannedPubKeys() {
		if e.Static != (e.PubKey == pkN(3)) {
			t.Fatalf("entry %+v after the reload", e)
		}
	}
	if now, _ := p.Load(ctx, KeyBannedPubKeys); string(now) != string(saved) {
		t.Fatalf("the reload persisted the bans: %s, was %s", now, saved)
	}

	if err := l.SetStatic(Config{BannedPubKeys: []string{pkN(5).Hex(), "zz"}}); err == nil {
		t.Fatal("a malformed pubkey was taken")
	}
	check(3, 1, banned)
	check(5, 1, "")
}

func TestListsPersist(t *testing.T) {
	p := &MemPersister{}
	l := newTestLists(t, Config{}, p)
	ev := testEvent("persist me")
	for _, err := range []error{
		l.BanPubKey(ctx, pkN(1), "spam"),
		l.AllowPubKey(ctx, pkN(2), "friend"),
		l.BanEvent(ctx, ev.ID, "illegal"),
		l.AllowEvent(ctx, testEvent("ok").ID, ""),
		l.AllowKind(ctx, 1),
		l.DisallowKind(ctx, 4),
		l.BlockIP(ctx, "203.0.113.0/24", "botnet"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every change is saved under its key, in the documented format.
	raw, err := p.Load(ctx, KeyBannedPubKeys)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version int `json:"version"`
		Entries []struct {
			Key    string `json:"key"`
			Reason string `json:"reason"`
			At     int64  `json:"at"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 1 || len(doc.Entries) != 1 || doc.Entries[0].Key != pkN(1).Hex() || doc.Entries[0].Reason != "spam" || doc.Entries[0].At == 0 {
		t.Fatalf("persisted %s", raw)
	}
	// A new Lists over the same persister has the same state.
	l2 := newTestLists(t, Config{}, p)
	if !slices.Equal(l.BannedPubKeys(), l2.BannedPubKeys()) || !slices.Equal(l.AllowedPubKeys(), l2.AllowedPubKeys()) ||
		!slices.Equal(l.BannedEvents(), l2.BannedEvents()) || !slices.Equal(l.AllowedEvents(), l2.AllowedEvents()) ||
		!slices.Equal(l.AllowedKinds(), l2.AllowedKinds()) || !slices.Equal(l.DisallowedKinds(), l2.DisallowedKinds()) ||
		!slices.Equal(l.BlockedIPs(), l2.BlockedIPs()) {
		t.Fatal("reloaded lists differ")
	}
	if l2.CheckEvent(ev) != rejEventBanned || l2.CheckIP(netip.MustParseAddr("203.0.113.77")) == nil {
		t.Fatal("reloaded lists do not apply")
	}
	if e := l2.BlockedIPs()[0]; e.Reason != "botnet" || e.Static {
		t.Fatalf("entry %+v", e)
	}
}

// failOn is a persister that fails saves of one key.
type failOn struct {
	MemPersister
	key string
}

func (p *failOn) Save(ctx context.Context, key string, v []byte) error {
	if key == p.key {
		return errors.New("disk full")
	}
	return p.MemPersister.Save(ctx, key, v)
}

func (p *failOn) Update(ctx context.Context, key string, f func([]byte, bool) ([]byte, error)) error {
	if key == p.key {
		return errors.New("disk full")
	}
	return p.MemPersister.Update(ctx, key, f)
}

func TestListsSaveFailure(t *testing.T) {
	p := &MemPersister{}
	l := newTestLists(t, Config{}, p)
	p.Fail = errors.New("disk full")
	if err := l.BanPubKey(ctx, pkN(1), ""); err == nil {
		t.Fatal("ban succeeded without being saved")
	}
	if len(l.BannedPubKeys()) != 0 || l.CheckEvent(testEventBy(keyN(1), 1, "x")) != nil {
		t.Fatal("an unsaved change was applied")
	}

	// Two-list change whose second save fails: the first, saved, is applied
	// (memory never differs from what is durable), and the state is the
	// stricter one.
	fp := &failOn{key: KeyBannedPubKeys}
	l = newTestLists(t, Config{}, fp)
	if err := l.BanPubKey(ctx, pkN(1), ""); err == nil {
		t.Fatal("expected an error")
	}
	fp.key = ""
	if err := l.BanPubKey(ctx, pkN(1), ""); err != nil {
		t.Fatal(err)
	}
	fp.key = KeyBannedPubKeys
	if err := l.AllowPubKey(ctx, pkN(1), ""); err == nil {
		t.Fatal("expected an error")
	}
	if len(l.AllowedPubKeys()) != 1 || len(l.BannedPubKeys()) != 1 {
		t.Fatalf("allowed %v banned %v", l.AllowedPubKeys(), l.BannedPubKeys())
	}
	if l.CheckEvent(testEventBy(keyN(1), 1, "x")) != rejPubKeyBanned {
		t.Fatal("half-done allow is not the stricter state")
	}
	l2 := newTestLists(t, Config{}, fp)
	if !slices.Equal(l.AllowedPubKeys(), l2.AllowedPubKeys()) || !slices.Equal(l.BannedPubKeys(), l2.BannedPubKeys()) {
		t.Fatal("memory differs from what was saved")
	}
}

// storeNotFound returns store.ErrNotFound, as a store-backed persister may.
type storeNotFound struct{ MemPersister }

func (*storeNotFound) Load(context.Context, string) ([]byte, error) { return nil, store.ErrNotFound }

func TestNewListsErrors(t *testing.T) {
	if _, err := NewLists(ctx, Config{}, &storeNotFound{}); err != nil {
		t.Fatalf("store.ErrNotFound: %v", err)
	}
	f := func(cfg Config, data string, want error) {
		t.Helper()
		p := &MemPersister{}
		if data != "" {
			p.Save(ctx, KeyBlockedIPs, []byte(data))
		}
		_, err := NewLists(ctx, cfg, p)
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
		if err != nil && cfg.Validate() == nil && data == "" {
			t.Fatal("Validate passed a configuration NewLists refuses")
		}
	}
	f(Config{BannedPubKeys: []string{"nothex"}}, "", ErrInvalid)
	f(Config{AllowedPubKeys: []string{pkN(1).Hex()[:60]}}, "", ErrInvalid)
	f(Config{AllowedKinds: []int{70000}}, "", ErrInvalid)
	f(Config{DisallowedKinds: []int{-3}}, "", ErrInvalid)
	f(Config{BlockedIPs: []string{"300.1.1.1"}}, "", ErrInvalid)
	// Each bad value is told once, by the list it is on and why.
	_, err := NewLists(ctx, Config{BannedPubKeys: []string{"zz", pkN(1).Hex()[:60]}}, &MemPersister{})
	if want := "policy: configuration: banned_pubkeys: not a public key (64 hex characters, npub or nprofile): \"zz\": not a valid bech32 string: 2 characters, too short to be one\n" +
		"banned_pubkeys: not a public key (64 hex characters, npub or nprofile): \"" + pkN(1).Hex()[:60] + "\": 60 hex characters, not 64"; err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	f(Config{BannedPubKeys: []string{pkN(1).Hex()}}, "", nil)
	f(Config{}, `{"version":1,"entries":[{"key":"1.2.3.4"}]}`, nil)
	f(Config{}, `{"version":2,"entries":[]}`, ErrCorrupt)
	f(Config{}, `{"version":1,"entries":[{"key":"nope"}]}`, ErrCorrupt)
	f(Config{}, `{"version":1,`, ErrCorrupt)
	if err := (Config{MinPoWDifficulty: 257}).Validate(); err == nil {
		t.Fatal("pow 257 valid")
	}
}

func TestListsConcurrent(t *testing.T) {
	l := newTestLists(t, Config{}, &MemPersister{})
	evs := make([]*nostr.Event, 16)
	for i := range evs {
		evs[i] = testEventBy(keyN(i), i%3, "x")
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip := netip.MustParseAddr("203.0.113.1")
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, ev := range evs {
					l.CheckEvent(ev)
				}
				l.CheckIP(ip)
			}
		}()
	}
	for i := 0; i < 200; i++ {
		pk := evs[i%len(evs)].PubKey
		if i%2 == 0 {
			l.BanPubKey(ctx, pk, "")
			l.BlockIP(ctx, "203.0.113.0/24", "")
			l.DisallowKind(ctx, i%3)
		} else {
			l.UnbanPubKey(ctx, pk)
			l.UnblockIP(ctx, "203.0.113.0/24")
			l.AllowKind(ctx, i%3)
		}
	}
	close(stop)
	wg.Wait()
}

func TestDirPersister(t *testing.T) {
	p := DirPersister{Dir: t.TempDir() + "/sub"}
	if _, err := p.Load(ctx, KeyBannedPubKeys); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load missing: %v", err)
	}
	l := newTestLists(t, Config{}, p)
	if err := l.BanPubKey(ctx, pkN(9), "x"); err != nil {
		t.Fatal(err)
	}
	if err := l.BanPubKey(ctx, pkN(8), "y"); err != nil {
		t.Fatal(err)
	}
	l2 := newTestLists(t, Config{}, p)
	if len(l2.BannedPubKeys()) != 2 {
		t.Fatalf("reloaded %v", l2.BannedPubKeys())
	}
	if err := p.Save(ctx, "..", nil); err == nil {
		t.Fatal("bad key accepted")
	}
}

func FuzzParseIPBlock(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.2.3.0/24", "::1", "2001:db8::/32", "::ffff:1.2.3.4", "::ffff:1.2.3.0/120", "fe80::1%eth0", "1.2.3.4/0", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseIPBlock(s)
		if err != nil {
			return
		}
		if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			t.Fatalf("%q: non-canonical %v", s, p)
		}
		q, err := parseIPBlock(formatIPBlock(p))
		if err != nil || q != p {
			t.Fatalf("%q: round trip %v -> %q -> %v, %v", s, p, formatIPBlock(p), q, err)
		}
	})
}

func FuzzDecodeList(f *testing.F) {
	f.Add([]byte(`{"version":1,"entries":[{"key":"1.2.3.0/24","reason":"x","at":5}]}`))
	f.Add([]byte(`{"version":1,"entries":[{"key":"::1"},{"key":"::1"}]}`))
	f.Add([]byte(`{"version":1,"entries":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeSet(data, parseIPBlock)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		m2, err := decodeSet(encodeSet(m, formatIPBlock), parseIPBlock)
		if err != nil || len(m2) != len(m) {
			t.Fatalf("re-decode: %v, %d vs %d entries", err, len(m2), len(m))
		}
		for k, v := range m {
			if m2[k] != v {
				t.Fatalf("entry %v: %+v vs %+v", k, v, m2[k])
			}
		}
	})
}

func BenchmarkCheckEvent(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("banned=%d", n), func(b *testing.B) {
			l := newTestLists(b, Config{DisallowedKinds: []int{4}}, nil)
			s := l.snap.Load()
			for i := 0; i < n; i++ {
				var pk nostr.PubKey
				pk[0], pk[1], pk[2] = byte(i), byte(i>>8), 0xee
				s.bannedPK.dynamic[pk] = entry{}
				s.bannedEv.dynamic[nostr.ID(pk)] = entry{}
			}
			ev := testEvent("bench")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if l.CheckEvent(ev) != nil {
					b.Fatal("rejected")
				}
			}
		})
	}
}

func BenchmarkCheckIP(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("blocked=%d", n), func(b *testing.B) {
			l := newTestLists(b, Config{}, nil)
			for i := 0; i < n; i++ {
				// A mix of prefix lengths, so lookups probe several.
				ip := fmt.Sprintf("10.%d.%d.0/%d", i/256, i%256, 16+i%9)
				if err := l.BlockIP(ctx, ip, ""); err != nil {
					b.Fatal(err)
				}
			}
			for _, fam := range []string{"v4", "v6"} {
				addr := netip.MustParseAddr("203.0.113.9")
				if fam == "v6" {
					addr = netip.MustParseAddr("2001:db8::9")
				}
				b.Run(fam, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						if l.CheckIP(addr) != nil {
							b.Fatal("blocked")
						}
					}
				})
			}
		})
	}
}

// TestListsShared: two Lists on one persister (two nodes on one store).
// A change through one is made to the lists as persisted, so it keeps
// what the other changed; Refresh brings the other's changes in and
// reports them once.
func TestListsShared(t *testing.T) {
	p := &MemPersister{}
	n1, n2 := newTestLists(t, Config{}, p), newTestLists(t, Config{}, p)
	if err := n1.BanPubKey(ctx, pkN(1), "through node 1"); err != nil {
		t.Fatal(err)
	}
	if err := n2.BanPubKey(ctx, pkN(2), "through node 2"); err != nil {
		t.Fatal(err)
	}
	if err := n2.BlockIP(ctx, "192.0.2.1", "through node 2"); err != nil {
		t.Fatal(err)
	}
	for n, l := range []*Lists{n1, n2} {
		if n == 0 {
			if changed, err := l.Refresh(ctx); err != nil || !changed {
				t.Fatalf("node 1's refresh after node 2's changes: %v, %v", changed, err)
			}
		}
		if changed, err := l.Refresh(ctx); err != nil || changed {
			t.Fatalf("node %d's refresh with nothing new: %v, %v", n+1, changed, err)
		}
		if got := len(l.BannedPubKeys()); got != 2 {
			t.Fatalf("node %d bans %d pubkeys, want both", n+1, got)
		}
		if l.CheckIP(netip.MustParseAddr("192.0.2.1")) == nil {
			t.Fatalf("node %d does not block node 2's address", n+1)
		}
	}
}

// latent is a MemPersister whose every call takes a little while, as a
// database's round trip does.
type latent struct{ MemPersister }

func (p *latent) Load(ctx context.Context, key string) ([]byte, error) {
	time.Sleep(200 * time.Microsecond)
	return p.MemPersister.Load(ctx, key)
}

func (p *latent) Save(ctx context.Context, key string, v []byte) error {
	time.Sleep(200 * time.Microsecond)
	return p.MemPersister.Save(ctx, key, v)
}

func (p *latent) Update(ctx context.Context, key string, f func([]byte, bool) ([]byte, error)) error {
	time.Sleep(200 * time.Microsecond)
	return p.MemPersister.Update(ctx, key, func(old []byte, found bool) ([]byte, error) {
		time.Sleep(200 * time.Microsecond)
		return f(old, found)
	})
}

// TestListsSharedAtOnce: two Lists on one persister (two nodes on one
// store), each changing the same lists at the same time (two admins
// working through two nodes): every change stays, in the store and, once
// refreshed, on both nodes.
func TestListsSharedAtOnce(t *testing.T) {
	p := &latent{}
	nodes := []*Lists{newTestLists(t, Config{}, p), newTestLists(t, Config{}, p)}
	const each = 20
	var wg sync.WaitGroup
	errs := make(chan error, 4*each)
	for n, l := range nodes {
		wg.Go(func() {
			for i := range each {
				errs <- l.BanPubKey(ctx, pkN(100*n+i), "")
				errs <- l.BlockIP(ctx, fmt.Sprintf("192.0.%d.%d", n, i), "")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for n, l := range append(nodes, newTestLists(t, Config{}, p)) {
		if _, err := l.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got, got2 := len(l.BannedPubKeys()), len(l.BlockedIPs()); got != 2*each || got2 != 2*each {
			t.Fatalf("node %d: %d pubkeys banned and %d addresses blocked, want %d of each", n+1, got, got2, 2*each)
		}
	}
}
