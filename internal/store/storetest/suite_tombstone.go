package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// RunTombstoner checks a store's store.Tombstoner: the tombstones a store
// lists are those its deletions and requests to vanish made, and a fresh
// store given them (RestoreTombstones) lists the same and refuses the
// same events, with horizons that only grow. open must return a fresh,
// empty store implementing store.Tombstoner each time it is called;
// RunTombstoner closes the stores it opens.
func RunTombstoner(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	opened := func() (store.Store, store.Tombstoner) {
		st := open(t)
		t.Cleanup(func() { st.Close() })
		ts, ok := st.(store.Tombstoner)
		if !ok {
			t.Fatalf("%T does not implement store.Tombstoner", st)
		}
		return st, ts
	}
	src, srcT := opened()
	h := newH(t, src)
	const kind = 30023
	shortD, longD := "post", strings.Repeat("d", 300)
	hash := sha256.Sum256([]byte(longD))
	e1 := h.ev(1, 1, BaseTime)
	future := h.ev(1, 1, BaseTime+500) // deleted before it is stored
	a1 := h.ev(1, kind, BaseTime+10, nostr.Tag{"d", shortD})
	a2 := h.ev(1, kind, BaseTime+10, nostr.Tag{"d", longD})
	y1 := h.ev(2, 1, BaseTime+5)
	wrap := h.ev(3, nostr.KindGiftWrap, BaseTime+6, nostr.Tag{"p", Key(2).Hex()})
	h.stored(e1, a1, a2, y1, wrap)
	h.stored(h.ev(1, nostr.KindDeletion, BaseTime+20, eTag(e1), eTag(future),
		nostr.Tag{"a", ATag(kind, Key(1), shortD)}, nostr.Tag{"a", ATag(kind, Key(1), longD)}))
	h.stored(h.ev(2, nostr.KindRequestToVanish, BaseTime+30))
	want := []store.Tombstone{
		{Type: store.TombstoneID, ID: e1.ID, PubKey: Key(1)},
		{Type: store.TombstoneID, ID: future.ID, PubKey: Key(1)},
		{Type: store.TombstoneAddr, PubKey: Key(1), Kind: kind, D: shortD, CreatedAt: BaseTime + 20},
		{Type: store.TombstoneAddr, PubKey: Key(1), Kind: kind, D: string(hash[:]), DHashed: true, CreatedAt: BaseTime + 20},
		{Type: store.TombstoneVanish, PubKey: Key(2), CreatedAt: BaseTime + 30},
	}
	checkTombstones(t, srcT, want)

	// A fresh store given the list holds the same and refuses what the
	// source refuses, whatever the deletion requests.
	dst, dstT := opened()
	if err := dstT.RestoreTombstones(ctx, listTombstones(t, srcT)); err != nil {
		t.Fatal(err)
	}
	checkTombstones(t, dstT, want)
	hd := newH(t, dst)
	hd.outcomes([]*nostr.Event{e1, future, a1, a2, y1, wrap, hd.ev(2, 7, BaseTime+30)},
		store.Deleted, store.Deleted, store.Deleted, store.Deleted, store.Deleted, store.Deleted, store.Deleted)
	// An "e" tombstone is the deleter's: the same id by someone else is
	// not refused (nor are deletion requests and requests to vanish).
	hd.stored(WithID(hd.ev(4, 1, BaseTime), e1.ID))
	hd.stored(WithID(hd.ev(1, nostr.KindDeletion, BaseTime+1), future.ID))
	hd.stored(hd.ev(1, kind, BaseTime+21, nostr.Tag{"d", shortD}), hd.ev(1, kind, BaseTime+21, nostr.Tag{"d", longD}),
		hd.ev(2, 1, BaseTime+31), hd.ev(3, nostr.KindGiftWrap, BaseTime+31, nostr.Tag{"p", Key(2).Hex()}))

	// Horizons only grow; restoring what is there changes nothing.
	err := dstT.RestoreTombstones(ctx, []store.Tombstone{
		{Type: store.TombstoneAddr, PubKey: Key(1), Kind: kind, D: shortD, CreatedAt: BaseTime + 5},
		{Type: store.TombstoneVanish, PubKey: Key(2), CreatedAt: BaseTime + 1},
		want[0], want[3],
	})
	if err != nil {
		t.Fatal(err)
	}
	checkTombstones(t, dstT, want)
	// A later horizon wins, also twice in one call.
	later := []store.Tombstone{
		{Type: store.TombstoneVanish, PubKey: Key(2), CreatedAt: BaseTime + 40},
		{Type: store.TombstoneVanish, PubKey: Key(2), CreatedAt: BaseTime + 45},
		{Type: store.TombstoneAddr, PubKey: Key(1), Kind: kind, D: shortD, CreatedAt: BaseTime + 50},
		{Type: store.TombstoneAddr, PubKey: Key(1), Kind: kind, D: shortD, CreatedAt: BaseTime + 25},
	}
	if err := dstT.RestoreTombstones(ctx, later); err != nil {
		t.Fatal(err)
	}
	want[2].CreatedAt, want[4].CreatedAt = BaseTime+50, BaseTime+45
	checkTombstones(t, dstT, want)
	hd.outcomes([]*nostr.Event{hd.ev(2, 1, BaseTime+45), hd.ev(1, kind, BaseTime+50, nostr.Tag{"d", shortD}), hd.ev(2, 1, BaseTime+46)},
		store.Deleted, store.Deleted, store.Stored)

	// Malformed tombstones are refused, and nothing of the call is kept.
	bad := func(tb store.Tombstone) {
		t.Helper()
		err := dstT.RestoreTombstones(ctx, []store.Tombstone{{Type: store.TombstoneVanish, PubKey: Key(9), CreatedAt: BaseTime}, tb})
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("%+v: error %v, want ErrInvalid", tb, err)
		}
	}
	bad(store.Tombstone{Type: store.TombstoneAddr, PubKey: Key(1), Kind: 1, D: "x"})
	bad(store.Tombstone{Type: store.TombstoneAddr, PubKey: Key(1), Kind: kind, D: "short", DHashed: true})
	bad(store.Tombstone{Type: store.TombstoneAddr, PubKey: Key(1), Kind: kind, D: longD})
	bad(store.Tombstone{Type: store.TombstoneVanish, PubKey: Key(1), CreatedAt: -1})
	bad(store.Tombstone{Type: 9})
	checkTombstones(t, dstT, want)
	if err := dstT.RestoreTombstones(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// fn's error ends the listing.
	stop := errors.New("stop")
	n := 0
	if err := srcT.Tombstones(ctx, func(*store.Tombstone) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Tombstones with a failing fn: %v after %d calls", err, n)
	}
	dst.Close()
	if err := dstT.RestoreTombstones(ctx, want); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("RestoreTombstones after Close: %v", err)
	}
	if err := dstT.Tombstones(ctx, func(*store.Tombstone) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Tombstones after Close: %v", err)
	}
}

// listTombstones returns every tombstone of ts.
func listTombstones(t *testing.T, ts store.Tombstoner) []store.Tombstone {
	t.Helper()
	var out []store.Tombstone
	if err := ts.Tombstones(context.Background(), func(tb *store.Tombstone) error {
		out = append(out, *tb)
		return nil
	}); err != nil {
		t.Fatalf("Tombstones: %v", err)
	}
	return out
}

// checkTombstones checks that ts lists exactly want, in any order.
func checkTombstones(t *testing.T, ts store.Tombstoner, want []store.Tombstone) {
	t.Helper()
	got := listTombstones(t, ts)
	key := func(tb store.Tombstone) string {
		switch tb.Type {
		case store.TombstoneID:
			return fmt.Sprintf("id %x by %x", tb.ID[:6], tb.PubKey[:6])
		case store.TombstoneAddr:
			return fmt.Sprintf("address %d:%x:%q (hashed %v) up to %d", tb.Kind, tb.PubKey[:6], tb.D, tb.DHashed, tb.CreatedAt)
		}
		return fmt.Sprintf("%v %x up to %d", tb.Type, tb.PubKey[:6], tb.CreatedAt)
	}
	g, w := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		g[i] = key(got[i])
	}
	for i := range want {
		w[i] = key(want[i])
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("tombstones:\n%q\nwant\n%q", g, w)
	}
}
