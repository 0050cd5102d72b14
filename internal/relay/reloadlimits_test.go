package relay_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestReloadLimits: a reload's [relay] message limits apply to an open
// connection's next message: max_subscriptions lowered (the open
// subscriptions stay, a new one is refused), max_filters, max_limit (the
// new clamp), max_event_bytes and auth_required; NIP-11's limitation and
// Config follow; an invalid configuration changes nothing.
func TestReloadLimits(t *testing.T) {
	t.Parallel()
	cfg := relay.Config{MaxSubscriptions: 3, MaxLimit: 10}
	r := relaytest.Start(t, relaytest.Options{Relay: cfg})
	c := relaytest.Dial(t, r.URL)
	alice := relaytest.NewKey("alice")
	for i := range 4 {
		c.MustPublish(alice.Note(fmt.Sprint("note ", i)))
	}
	if evs := c.Req("a", `{"kinds":[1]}`); len(evs) != 4 {
		t.Fatalf("before the reload: %d events, want 4", len(evs))
	}
	c.Req("b", `{"kinds":[7]}`)

	cfg.MaxSubscriptions, cfg.MaxLimit, cfg.MaxFilters, cfg.MaxEventBytes = 1, 2, 1, 1000
	if err := r.Relay.ReloadLimits(cfg); err != nil {
		t.Fatal(err)
	}
	c.SendRaw(`["REQ","c",{"kinds":[7]}]`)
	c.ExpectClosed("c", "blocked: too many open subscriptions")
	c.Send("CLOSE", "a")
	c.Send("CLOSE", "b")
	if evs := c.Req("d", `{"kinds":[1]}`); len(evs) != 2 {
		t.Fatalf("after the reload: %d events, want max_limit's 2", len(evs))
	}
	c.Send("CLOSE", "d")
	c.SendRaw(`["REQ","e",{"kinds":[1]},{"kinds":[7]}]`)
	c.ExpectClosed("e", "invalid: ")
	if m := c.Publish(sizedEvent(t, alice, nil, 1001)); m.OK || m.Message != "invalid: event too large" {
		t.Fatalf("1001 bytes past max_event_bytes 1000: %v %q", m.OK, m.Message)
	}
	c.MustPublish(sizedEvent(t, alice, nil, 1000))

	cfg.AuthRequired = true
	if err := r.Relay.ReloadLimits(cfg); err != nil {
		t.Fatal(err)
	}
	c.SendRaw(`["EVENT",` + string(alice.Note("unauthenticated").Raw) + `]`)
	c.ExpectType("AUTH") // the challenge comes first
	if m := c.ExpectType("OK"); m.OK || !strings.HasPrefix(m.Message, "auth-required:") {
		t.Fatalf("auth_required on: %v %q", m.OK, m.Message)
	}
	lim, _ := nip11Doc(t, r)["limitation"].(map[string]any)
	if lim["max_subscriptions"] != 1.0 || lim["max_limit"] != 2.0 || lim["max_filters"] != 1.0 || lim["auth_required"] != true {
		t.Fatalf("NIP-11 limitation after the reload: %v", lim)
	}
	bad := cfg
	bad.MaxLimit, bad.VerifyMode = 50, "bogus"
	if err := r.Relay.ReloadLimits(bad); err == nil {
		t.Fatal("an invalid configuration was applied")
	}
	if got := r.Relay.Config(); got.MaxLimit != 2 || !got.AuthRequired || got.MaxEventBytes != 1000 {
		t.Fatalf("Config after a refused reload: max_limit %d, auth_required %v, max_event_bytes %d", got.MaxLimit, got.AuthRequired, got.MaxEventBytes)
	}
}
