package cluster

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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

// TestSharesFitMaxPayload: on a NATS server whose max_payload is smaller
// than a full share (1 KB here), the rate limits' spending goes in
// several messages that fit, all of it heard on the other node, and a
// connection-count message lists as many addresses as fit rather than
// being refused whole: nothing counted in bus_errors.
func TestSharesFitMaxPayload(t *testing.T) {
	t.Parallel()
	skipWithoutNATS(t)
	const maxPayload = 1024
	url := "nats://127.0.0.1:" + strconv.Itoa(startNATSConfig(t, "max_payload: "+strconv.Itoa(maxPayload)+"\n"))
	subject, st := testSubject(t), sharedStore(t)
	ro := relaytest.Options{
		Policy: policy.Config{EventRate: 1000, EventBurst: 1000, PubKeyEventRate: 0.01, PubKeyEventBurst: 10},
		Server: server.Config{MaxConnectionsPerIP: 32}, // told from 2 connections
	}
	a := startNodeWith(t, url, "a", subject, st, ro, nil)
	b := startNodeWith(t, url, "b", subject, st, ro, nil)
	waitConnected(t, a, b)
	limit := a.b.ShareLimit()
	if limit <= 0 || limit >= maxPayload {
		t.Fatalf("share limit %d with max_payload %d", limit, maxPayload)
	}

	// 100 authors' notes at once: their pubkeys' spending (33 bytes each)
	// is more than one message holds.
	const authors = 100
	c := relaytest.Dial(t, a.r.URL)
	for i := range authors {
		c.SendRaw(`["EVENT",` + string(relaytest.NewKey(fmt.Sprint("fit author ", i)).Note("fits").Raw) + `]`)
	}
	for range authors {
		if m := c.Read(); m.Type != "OK" || !m.OK {
			t.Fatalf("publish: %+v", m)
		}
	}
	waitFor(t, "b to hear every author's spending", func() bool {
		return b.r.Relay.PolicyStats().EventRatePubKey.Remote == authors
	})

	// 60 addresses with 2 connections each (19 bytes an address in a
	// message, 1,140 in all): the message lists as many as fit
	// (internal/server's connShareFits: 22 bytes an address at most).
	const addrs = 60
	for i := range addrs {
		for range 2 {
			if _, err := relaytest.DialWith(t, a.r.URL, relaytest.DialOptions{LocalIP: fmt.Sprintf("127.0.1.%d", i+1)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fit := (limit - 1) / (16 + 1 + binary.MaxVarintLen32)
	if fit >= addrs {
		t.Fatalf("%d addresses fit in %d bytes: the test needs more", fit, limit)
	}
	waitFor(t, "b to hear of the addresses that fit", func() bool { return remoteAddresses(t, b) == fit })
	if sa, sb := a.b.Stats(), b.b.Stats(); sa.BusErrors != 0 || sb.BusErrors != 0 {
		t.Fatalf("bus errors: a %d, b %d", sa.BusErrors, sb.BusErrors)
	}
}
