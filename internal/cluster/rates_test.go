package cluster

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestRateShare: a client spread over two nodes (one connection to
// each, as a load balancer's leastconn spreads them) gets one node's
// per-address EVENT limit, not one per node: the burst taken through
// both is accepted, what passes it is refused with "rate-limited:" on
// either node, and another address on the same nodes is untouched. The
// rate refills one token in 100 s, so nothing refills while it runs.
func TestRateShare(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	ro := relaytest.Options{Policy: policy.Config{EventRate: 0.01, EventBurst: 10}}
	a := startNodeWith(t, url, "a", subject, st, ro, nil)
	b := startNodeWith(t, url, "b", subject, st, ro, nil)
	waitConnected(t, a, b)
	alice := relaytest.NewKey("rate share alice")
	ca, cb := relaytest.Dial(t, a.r.URL), relaytest.Dial(t, b.r.URL)
	publish := func(c *relaytest.Client, n int, tag string) (ok, limited int) {
		t.Helper()
		for i := range n {
			m := c.Publish(alice.Note(fmt.Sprint(tag, " ", i)))
			switch {
			case m.OK:
				ok++
			case strings.HasPrefix(m.Message, "rate-limited:"):
				limited++
			default:
				t.Fatalf("%s %d: %v %q", tag, i, m.OK, m.Message)
			}
		}
		return ok, limited
	}
	remote := func(n *node) int64 { return n.r.Relay.PolicyStats().EventRateIP.Remote }

	if ok, _ := publish(ca, 6, "through a"); ok != 6 {
		t.Fatalf("a accepted %d of 6 within the burst", ok)
	}
	waitFor(t, "a's spending on b", func() bool { return remote(b) == 6 })
	// Four more reach the burst of 10 through b; two past it are refused.
	if ok, limited := publish(cb, 6, "through b"); ok != 4 || limited != 2 {
		t.Fatalf("b accepted %d and refused %d, want 4 and 2 (the burst of 10 taken through both)", ok, limited)
	}
	waitFor(t, "b's spending on a", func() bool { return remote(a) == 4 })
	if ok, limited := publish(ca, 1, "a again"); ok != 0 || limited != 1 {
		t.Fatalf("a accepted %d past the shared burst", ok)
	}
	// Another address through both nodes: its own burst.
	for _, n := range []*node{a, b} {
		c, err := relaytest.DialWith(t, n.r.URL, relaytest.DialOptions{LocalIP: "127.0.0.2"})
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := publish(c, 2, "from 127.0.0.2 through "+n.name); ok != 2 {
			t.Fatalf("127.0.0.2 through %s: %d of 2 accepted", n.name, ok)
		}
	}
	sa, sb := a.b.Stats(), b.b.Stats()
	if sa.RateSharesSent < 1 || sb.RateSharesSent < 1 || sa.RateSharesReceived < 1 || sb.RateSharesReceived < 1 {
		t.Fatalf("rate shares: a sent %d received %d, b sent %d received %d", sa.RateSharesSent, sa.RateSharesReceived, sb.RateSharesSent, sb.RateSharesReceived)
	}
	if pa, pb := a.r.Relay.PolicyStats().EventRateIP, b.r.Relay.PolicyStats().EventRateIP; pa.Limited != 1 || pb.Limited != 2 {
		t.Fatalf("limited: a %+v, b %+v", pa, pb)
	}
}

// TestConnCapShare: server.max_connections_per_ip holds across two nodes
// over real NATS: 5 connections from one address on a leave 3 for b (a
// cap of 8; addresses with 2 or more are told), the 4th refused there
// while another address still connects; when a's close, b takes them.
func TestConnCapShare(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	ro := relaytest.Options{Server: server.Config{MaxConnectionsPerIP: 8}}
	a := startNodeWith(t, url, "a", subject, st, ro, nil)
	b := startNodeWith(t, url, "b", subject, st, ro, nil)
	waitConnected(t, a, b)
	dial := func(n *node, from string) (*relaytest.Client, error) {
		return relaytest.DialWith(t, n.r.URL, relaytest.DialOptions{LocalIP: from})
	}
	var onA []*relaytest.Client
	for i := range 5 {
		c, err := dial(a, "127.0.0.2")
		if err != nil {
			t.Fatalf("connection %d on a: %v", i, err)
		}
		onA = append(onA, c)
	}
	// A message may have left while the five were opening: wait for two
	// more (in order, the second sent after all five were open).
	heard := b.b.Stats().ConnSharesReceived
	waitFor(t, "b to hear of a's five connections", func() bool {
		return remoteAddresses(t, b) == 1 && b.b.Stats().ConnSharesReceived >= heard+2
	})
	for i := range 3 {
		if _, err := dial(b, "127.0.0.2"); err != nil {
			t.Fatalf("connection %d on b (of the 3 left): %v", i, err)
		}
	}
	if _, err := dial(b, "127.0.0.2"); err == nil {
		t.Fatal("b admitted a 9th connection from the address across both nodes")
	}
	if _, err := dial(b, "127.0.0.3"); err != nil {
		t.Fatalf("another address refused on b: %v", err)
	}
	for _, c := range onA {
		c.Close()
	}
	waitFor(t, "b to admit what a freed", func() bool {
		c, err := dial(b, "127.0.0.2")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if sa, sb := a.b.Stats(), b.b.Stats(); sa.ConnSharesSent < 1 || sb.ConnSharesReceived < 1 {
		t.Fatalf("conn shares: a sent %d, b received %d", sa.ConnSharesSent, sb.ConnSharesReceived)
	}
}

// remoteAddresses reads n's /stats connection_slots_remote_addresses.
func remoteAddresses(t *testing.T, n *node) int {
	t.Helper()
	resp, err := http.Get(n.r.HTTPURL() + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st server.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.SlotsRemoteAddresses
}

// TestSharesWaitNoBuffer: while a node's bus connection is down, what
// its rate limits take is not queued in NATS's reconnect buffer (where
// it would take the room of the events waiting there, and be stale
// when sent): no share is sent until the connection is back, then they
// go again.
func TestSharesWaitNoBuffer(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	px := startProxy(t, url)
	ro := relaytest.Options{Policy: policy.Config{EventRate: 1000, EventBurst: 1000}}
	a := startNodeWith(t, px.URL, "a", subject, st, ro, nil)
	b := startNodeWith(t, url, "b", subject, st, ro, nil)
	waitConnected(t, a, b)
	alice := relaytest.NewKey("shares alice")
	ca := relaytest.Dial(t, a.r.URL)
	ca.MustPublish(alice.Note("before"))
	waitFor(t, "a's first share", func() bool { return a.b.Stats().RateSharesSent >= 1 })

	px.Cut()
	waitFor(t, "a to notice", func() bool { return !a.b.Stats().Connected })
	sent := a.b.Stats().RateSharesSent
	for i := range 5 {
		ca.MustPublish(alice.Note(fmt.Sprint("during ", i)))
		time.Sleep(150 * time.Millisecond) // more than a share interval each
	}
	if got := a.b.Stats().RateSharesSent; got != sent {
		t.Fatalf("%d shares sent while the connection was down", got-sent)
	}
	px.Heal()
	waitFor(t, "a to reconnect", func() bool { return a.b.Stats().Connected })
	ca.MustPublish(alice.Note("after"))
	waitFor(t, "a share after the connection is back", func() bool { return a.b.Stats().RateSharesSent > sent })
}
