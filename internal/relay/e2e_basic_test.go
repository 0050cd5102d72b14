package relay_test

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestPublishAndQuery(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, r.URL)
	ev := alice.Note("hello world")
	c.MustPublish(ev)
	got := c.Req("s1", `{"authors":["`+alice.PK.Hex()+`"]}`)
	if len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("got %d events", len(got))
	}
	// live delivery after EOSE
	ev2 := alice.Note("second")
	c2 := relaytest.Dial(t, r.URL)
	c2.MustPublish(ev2)
	m := c.ExpectType("EVENT")
	if m.SubID != "s1" || m.Event.ID != ev2.ID {
		t.Fatalf("live: got %s %v", m.SubID, m.Event.ID)
	}
	// duplicate
	if m := c2.Publish(ev2); !m.OK || m.Message[:10] != "duplicate:" {
		t.Fatalf("duplicate: %+v", m)
	}
	_ = nostr.KindTextNote
}
