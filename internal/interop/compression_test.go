package interop

import (
	"context"
	"strings"
	"testing"
	"time"

	gonostr "github.com/nbd-wtf/go-nostr"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestGoNostrCompression: go-nostr's relay client (which offers
// permessage-deflate through gobwas/ws's wsflate) gets stored and live
// events from petrel exactly as they were published, and petrel sent
// them compressed.
func TestGoNostrCompression(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	k := relaytest.NewKey("go-nostr compression")
	base := time.Now().Unix() - 100
	var notes []*nostr.Event
	for i, content := range []string{"gm", strings.Repeat("compress me ", 80), "ünïcødé ✓", strings.Repeat("z", 3000), "bye"} {
		notes = append(notes, k.Event(nostr.KindTextNote, content, nostr.Tags{{"t", "interop"}}, base+int64(i)))
	}
	pub := relaytest.Dial(t, r.URL)
	for _, ev := range notes[:2] {
		pub.MustPublish(ev)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rl, err := gonostr.RelayConnect(ctx, r.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	sub, err := rl.Subscribe(ctx, gonostr.Filters{{Kinds: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*gonostr.Event{}
	next := func() {
		t.Helper()
		select {
		case ev := <-sub.Events:
			got[ev.ID] = ev
		case <-ctx.Done():
			t.Fatalf("go-nostr: %d events received; timed out", len(got))
		}
	}
	for range 2 {
		next()
	}
	select {
	case <-sub.EndOfStoredEvents:
	case <-ctx.Done():
		t.Fatal("no EOSE")
	}
	before := r.Stats().FramesCompressed
	for _, ev := range notes[2:] {
		pub.MustPublish(ev)
		next()
	}
	for _, ev := range notes {
		g := got[ev.ID.Hex()]
		if g == nil {
			t.Fatalf("event %s not received", ev.ID.Hex())
		}
		if g.Content != ev.Content || g.Sig != ev.Sig.Hex() || g.PubKey != ev.PubKey.Hex() || int64(g.CreatedAt) != ev.CreatedAt || len(g.Tags) != 1 {
			t.Fatalf("event %s received as %+v", ev.ID.Hex(), g)
		}
		if ok, err := g.CheckSignature(); !ok || err != nil {
			t.Fatalf("event %s: signature does not check out after the trip: %v", ev.ID.Hex(), err)
		}
	}
	if n := r.Stats().FramesCompressed - before; n < 3 {
		t.Fatalf("%d live frames compressed; want 3 (go-nostr negotiated permessage-deflate?)", n)
	}
}
