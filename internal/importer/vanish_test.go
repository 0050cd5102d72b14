package importer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestVanishAgreesWithRelay: `petrel import` and the live relay decide
// alike whether a request to vanish is addressed to this relay, for the
// same relay.url. Each request is published to a real relay configured
// with that URL and imported into a store for it; both must accept it
// (the relay's OK true, the import's stored) or both refuse it (OK false
// "invalid: request to vanish is for another relay", the import's
// vanish_for_other_relay). The query, opaque URLs and empty hosts are the
// cases where the import's own copy of the rule used to differ.
func TestVanishAgreesWithRelay(t *testing.T) {
	t.Parallel()
	type tagCase struct {
		tag  string
		want bool
	}
	f := func(own string, cases ...tagCase) {
		t.Helper()
		r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{URL: own}})
		c := relaytest.Dial(t, r.URL)
		for i, tc := range cases {
			// One author per request: a request to vanish deletes and
			// refuses its author's earlier events, earlier requests too.
			k := relaytest.NewKey(fmt.Sprintf("vanish-agree %q %d", own, i))
			ev := k.Event(nostr.KindRequestToVanish, "", nostr.Tags{{"relay", tc.tag}}, 0)

			m := c.Publish(ev)
			if !m.OK && m.Message != "invalid: request to vanish is for another relay" {
				t.Fatalf("own %q, tag %q: the relay refused for another reason: %s", own, tc.tag, m.Message)
			}
			res, err := Run(context.Background(), storetest.NewModel(), bytesLine(ev), Options{OwnURL: ownURL(t, own)})
			if err != nil {
				t.Fatal(err)
			}
			imported := res.Stored == 1
			if !imported && res.VanishElsewhere != 1 {
				t.Fatalf("own %q, tag %q: import counts %+v", own, tc.tag, res.Counts)
			}
			if m.OK != imported {
				t.Fatalf("own %q, tag %q: relay accepts %v, import stores %v", own, tc.tag, m.OK, imported)
			}
			if m.OK != tc.want {
				t.Fatalf("own %q, tag %q: both accept %v, want %v", own, tc.tag, m.OK, tc.want)
			}
		}
	}
	f("wss://relay.example.com",
		tagCase{"wss://relay.example.com", true},
		tagCase{"WSS://Relay.Example.com:443/", true},
		tagCase{"https://relay.example.com", true},
		tagCase{nostr.AllRelays, true},
		tagCase{"wss://relay.example.com?x=1", false}, // import used to accept
		tagCase{"wss://relay.example.com/?", true},
		tagCase{"wss:relay.example.com", false},
		tagCase{"wss://:443", false},
		tagCase{"wss://other.example.com", false},
		tagCase{"ws://127.0.0.1:7447", false},
	)
	f("wss://relay.example.com/?x=1",
		tagCase{"wss://relay.example.com?x=1", true},
		tagCase{"wss://relay.example.com", false}, // import used to accept
		tagCase{"wss://relay.example.com?x=2", false},
	)
	f("",
		tagCase{"ws://127.0.0.1:7447", true},
		tagCase{"ws://localhost/?x=1", true},
		tagCase{"ws://[::1]:7447", true},
		tagCase{nostr.AllRelays, true},
		tagCase{"ws:localhost", false},
		tagCase{"ws://:7447", false},
		tagCase{"wss://relay.example.com", false},
	)
}

// TestVanishOwnURLInvalid: a relay.url the relay refuses to start with is
// refused for an import too (nostr.ParseOwnURL, which `petrel import`
// calls), rather than taken as "not configured".
func TestVanishOwnURLInvalid(t *testing.T) {
	for _, own := range []string{"wss://:443", "wss:relay.example.com", "relay.example.com"} {
		if _, err := relay.New(relay.Config{URL: own}, relay.Options{Store: storetest.NewModel()}); err == nil {
			t.Fatalf("the relay starts with url %q", own)
		}
		if _, err := nostr.ParseOwnURL(own); !errors.Is(err, nostr.ErrRelayURL) {
			t.Fatalf("ParseOwnURL(%q): %v", own, err)
		}
	}
}
