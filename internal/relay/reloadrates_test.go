package relay_test

import (
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestReloadRates: a reload's rate limits apply to the running relay. A
// limit whose settings changed starts afresh (every bucket full) with its
// counters carried over; a limit left as it was keeps its buckets (a
// client that had used its REQ burst stays refused); the proof of work
// applies to the next event; an invalid configuration changes nothing.
func TestReloadRates(t *testing.T) {
	t.Parallel()
	pc := policy.Config{EventRate: 0.001, EventBurst: 1, ReqRate: 0.001, ReqBurst: 1}
	r := relaytest.Start(t, relaytest.Options{Policy: pc})
	c := relaytest.Dial(t, r.URL)
	alice := relaytest.NewKey("alice")
	refused := func(text, prefix string) {
		t.Helper()
		if m := c.Publish(alice.Note(text)); m.OK || !strings.HasPrefix(m.Message, prefix) {
			t.Fatalf("%s: OK %v %q, want refused with %s", text, m.OK, m.Message, prefix)
		}
	}
	c.MustPublish(alice.Note("the burst"))
	refused("past the burst", "rate-limited:")
	c.Req("a", `{"kinds":[7]}`)
	c.SendRaw(`["REQ","b",{"kinds":[7]}]`)
	c.ExpectClosed("b", "rate-limited: ")

	pc.EventBurst = 2
	if err := r.Relay.ReloadRates(pc); err != nil {
		t.Fatal(err)
	}
	c.MustPublish(alice.Note("the new burst, 1"))
	c.MustPublish(alice.Note("the new burst, 2"))
	refused("past the new burst", "rate-limited:")
	c.SendRaw(`["REQ","c",{"kinds":[7]}]`)
	c.ExpectClosed("c", "rate-limited: ")
	if st := r.Stats().Policy; st.EventRateIP.Limited != 2 || st.ReqRateIP.Limited != 2 {
		t.Fatalf("limited: %d events and %d REQs, want 2 and 2 (counted across the reload)", st.EventRateIP.Limited, st.ReqRateIP.Limited)
	}

	pc = policy.Config{MinPoWDifficulty: 28}
	if err := r.Relay.ReloadRates(pc); err != nil {
		t.Fatal(err)
	}
	refused("without work", "pow:")
	if err := r.Relay.ReloadRates(policy.Config{MinPoWDifficulty: 300}); err == nil {
		t.Fatal("min_pow_difficulty 300 applied")
	}
	refused("still without work", "pow:")
	if err := r.Relay.ReloadRates(policy.Config{}); err != nil {
		t.Fatal(err)
	}
	c.MustPublish(alice.Note("no limits left"))
	c.MustPublish(alice.Note("none at all"))
}

// TestReloadRatesOptimistic: the per-pubkey limit needs the signature
// checked first; with optimistic verification a reload cannot turn it
// on (it applies from the next start, which turns optimistic off for
// it), and changes nothing else either.
func TestReloadRatesOptimistic(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{VerifyMode: relay.VerifyOptimistic}})
	err := r.Relay.ReloadRates(policy.Config{PubKeyEventRate: 1, EventRate: 0.001, EventBurst: 1})
	if err == nil || !strings.Contains(err.Error(), "pubkey_event_rate") {
		t.Fatalf("a per-pubkey limit under optimistic verification: %v", err)
	}
	c := relaytest.Dial(t, r.URL)
	alice := relaytest.NewKey("alice")
	c.MustPublish(alice.Note("one"))
	c.MustPublish(alice.Note("two: no address limit either"))
}
