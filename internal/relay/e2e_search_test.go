package relay_test

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// TestSearchEndToEnd: NIP-50 over a real WebSocket on the pebble store:
// results ranked by relevance (not time), limit honoured, extensions
// ignored, other conditions applied; NIP-11 lists 50.
func TestSearchEndToEnd(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	alice, bob := relaytest.NewKey("search-alice"), relaytest.NewKey("search-bob")
	c := relaytest.Dial(t, r.URL)
	base := int64(1_700_000_000)
	once := alice.Event(1, "a note that mentions petrel once among many other words here", nil, base+3)
	twice := alice.Event(1, "petrel petrel", nil, base+1) // older, but more relevant
	other := bob.Event(1, "nothing to see", nil, base+2)
	bobs := bob.Event(1, "bob also likes the petrel", nil, base+4)
	c.MustPublish(once)
	c.MustPublish(twice)
	c.MustPublish(other)
	c.MustPublish(bobs)

	got := c.Req("s", `{"search":"petrel"}`)
	if len(got) != 3 || got[0].ID != twice.ID {
		t.Fatalf("ranked search: got %d events, first %v", len(got), got[0].Content)
	}
	if got := c.Req("l", `{"search":"petrel","limit":1}`); len(got) != 1 || got[0].ID != twice.ID {
		t.Fatalf("limit 1: %d", len(got))
	}
	if got := c.Req("a", `{"search":"petrel language:en nsfw:false","authors":["`+bob.PK.Hex()+`"]}`); len(got) != 1 || got[0].ID != bobs.ID {
		t.Fatalf("extensions + authors: %d", len(got))
	}
	if got := c.Req("n", `{"search":"albatross"}`); len(got) != 0 {
		t.Fatalf("no match: %d", len(got))
	}
	doc := nip11Doc(t, r)
	if nips := doc["supported_nips"].([]any); !containsAny(nips, 50) {
		t.Fatalf("supported_nips %v", nips)
	}
}

// TestSearchDisabled: with the index off, a search REQ is refused with
// CLOSED (so clients can tell "unsupported" from "no match") and NIP-11
// does not list 50.
func TestSearchDisabled(t *testing.T) {
	st, err := pebble.Open(pebble.Options{Path: t.TempDir(), DisableSearch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := relaytest.Start(t, relaytest.Options{Store: st})
	c := relaytest.Dial(t, r.URL)
	c.SendRaw(`["REQ","s",{"search":"petrel"}]`)
	c.ExpectClosed("s", "error: ")
	c.Req("ok", `{"kinds":[1]}`) // the connection still works
	doc := nip11Doc(t, r)
	if nips := doc["supported_nips"].([]any); containsAny(nips, 50) {
		t.Fatalf("supported_nips %v lists 50 without search", nips)
	}
}
