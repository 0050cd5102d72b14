package relay_test

import (
	"sync"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// recordingBus is the bus side a cluster provides, recording what the
// relay hands it.
type recordingBus struct {
	mu   sync.Mutex
	sent []busItem
}

type busItem struct {
	id  nostr.ID
	seq uint64
}

func (b *recordingBus) Publish(ev *nostr.Event, seq uint64) {
	b.mu.Lock()
	b.sent = append(b.sent, busItem{ev.ID, seq})
	b.mu.Unlock()
}

func (b *recordingBus) items() []busItem {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]busItem(nil), b.sent...)
}

// TestBusPublish: every event this node accepts goes to the bus once,
// after its OK, stored ones with their commit position and ephemeral ones
// with none; refused and duplicate events do not, nor do events that came
// from the bus (Relay.Publish), which local subscribers get once, and not
// again when their stored query saw the commit.
func TestBusPublish(t *testing.T) {
	t.Parallel()
	bus := &recordingBus{}
	r := relaytest.Start(t, relaytest.Options{Bus: bus})
	alice := relaytest.NewKey("bus-alice")
	c := relaytest.Dial(t, r.URL)

	note := alice.Note("stored")
	c.MustPublish(note)
	eph := alice.Event(20001, "ephemeral", nil, 0)
	c.MustPublish(eph)
	if m := c.Publish(note); !m.OK || m.Message == "" {
		t.Fatalf("duplicate: %s", describe(m))
	}
	bad := alice.Note("bad signature")
	bad.Sig[0] ^= 1
	bad.Raw = nostr.Serialize(bad)
	if m := c.Publish(bad); m.OK {
		t.Fatalf("bad signature accepted")
	}
	got := bus.items()
	if len(got) != 2 || got[0].id != note.ID || got[0].seq == 0 || got[1].id != eph.ID || got[1].seq != 0 {
		t.Fatalf("bus got %+v, want the note with a position, then the ephemeral event without", got)
	}

	// An event from another node: fanned out here, not sent back.
	sub := relaytest.Dial(t, r.URL)
	sub.Req("s", authorFilter(alice, ""))
	remote := alice.Note("from another node")
	r.Relay.Publish(remote, got[0].seq+1000)
	if m := sub.ExpectType("EVENT"); m.Event.ID != remote.ID {
		t.Fatalf("subscriber got %s", describe(m))
	}
	// One the subscriber's stored query already saw (its commit position
	// is the note's): not delivered again.
	r.Relay.Publish(note, got[0].seq)
	for _, m := range barrier(t, sub) {
		t.Fatalf("after the stored query saw it: %s", describe(m))
	}
	if n := len(bus.items()); n != 2 {
		t.Fatalf("bus got %d events, want the 2 accepted here", n)
	}
}
