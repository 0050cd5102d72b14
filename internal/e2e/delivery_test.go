package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// settle is how long the tests keep listening after the last expected
// event arrived, so that a late repeat (a catch-up replaying what the bus
// delivered) is seen: longer than a heartbeat and the silence timeout.
const settle = 4 * time.Second

// TestExactlyOnce: three nodes, subscribers and publishers on every node
// (directly, then all through HAProxy): every accepted event reaches every
// subscriber exactly once, and a REQ on every node finds each event as
// soon as its OK has arrived. Then a NIP-86 ban made through HAProxy
// holds on every node.
func TestExactlyOnce(t *testing.T) {
	c := startCluster(t, clusterOptions{nodes: 3, haproxy: true, env: []string{"PETREL_SERVER_ADMINS=" + e2eAdmin.PK.Hex()}})
	t.Run("direct", func(t *testing.T) { exactlyOnce(t, c, false) })
	t.Run("haproxy", func(t *testing.T) {
		exactlyOnce(t, c, true)
		forwardedAddress(t, c)
	})
	t.Run("nip86", func(t *testing.T) { nip86AcrossNodes(t, c) })
}

func exactlyOnce(t *testing.T, c *testCluster, viaProxy bool) {
	const (
		subsPerNode = 2
		pubsPerNode = 1
		perPub      = 150
	)
	start := time.Now()
	run := newRun()
	url := func(i int) string {
		if viaProxy {
			return c.proxy
		}
		return c.nodes[i%len(c.nodes)].url
	}
	before := make([]nodeStats, len(c.nodes))
	for i, n := range c.nodes {
		before[i] = n.mustStats(t)
	}
	var subs []*subscriber
	for i := range subsPerNode * len(c.nodes) {
		subs = append(subs, subscribe(t, fmt.Sprintf("sub%d@%s", i, nodeOrProxy(c, i, viaProxy)), url(i), runFilter(run, kindRegular)))
	}
	if viaProxy {
		// leastconn spreads the subscribers over every node.
		for i, n := range c.nodes {
			got := n.mustStats(t).SubscriptionsTotal - before[i].SubscriptionsTotal
			t.Logf("%s: %d of the subscriptions through HAProxy", n.name, got)
			if got < 1 {
				t.Errorf("%s got none of the %d subscriptions made through HAProxy", n.name, len(subs))
			}
		}
	}

	// Each publisher checks each event it gets OK true for with a REQ by
	// id on every node (through HAProxy: on three connections, which
	// leastconn spreads over the nodes as well).
	l := newLedger()
	var checks, misses int64
	var missMu sync.Mutex
	var missErrs []string
	var pubs []*publisher
	for i := range pubsPerNode * len(c.nodes) {
		var ks []*checker
		for j := range c.nodes {
			ks = append(ks, &checker{node: nodeOrProxy(c, i+j, viaProxy), conn: mustDial(t, url(i+j))})
		}
		p := &publisher{name: fmt.Sprintf("pub%d@%s", i, nodeOrProxy(c, i, viaProxy)), url: url(i),
			key: relaytest.NewKey(fmt.Sprintf("e2e-pub-%d", i)), run: run, kind: kindRegular, window: 4, count: perPub, l: l}
		p.afterOK = func(ev *nostr.Event, _ string) {
			for _, k := range ks {
				err := k.has(ev.ID)
				missMu.Lock()
				checks++
				if err != nil {
					misses++
					if len(missErrs) < 5 {
						missErrs = append(missErrs, err.Error())
					}
				}
				missMu.Unlock()
			}
		}
		pubs = append(pubs, p.start())
	}
	for _, p := range pubs {
		<-p.done
		t.Log(p.summary())
		if p.err != nil {
			t.Error(p.err)
		}
	}
	acked := l.acked()
	total := perPub * len(pubs)
	if len(acked) != total {
		t.Errorf("OK true for %d of %d events (refusals %v)", len(acked), total, l.refusals())
	}
	t.Logf("REQ after OK: %d checks, %d misses %v", checks, misses, missErrs)
	if misses != 0 || checks != int64(len(acked)*len(c.nodes)) {
		t.Errorf("REQ after OK: %d checks (want %d), %d found nothing: %v", checks, len(acked)*len(c.nodes), misses, missErrs)
	}

	waited := waitFor(t, "every subscriber to receive every accepted event", 60*time.Second, func() bool {
		for _, s := range subs {
			if !s.hasAll(acked) {
				return false
			}
		}
		return true
	})
	time.Sleep(settle)
	for _, s := range subs {
		d := s.compare(acked)
		t.Logf("%s: %s", s.name, d)
		if d.missing != 0 || d.extra != 0 || d.repeats != 0 {
			t.Errorf("%s: %s, want each of the %d accepted events exactly once", s.name, d, len(acked))
		}
		if msg, ended := s.closedMessage(); msg != "" || ended {
			t.Errorf("%s: subscription ended (CLOSED %q, connection ended %v)", s.name, msg, ended)
		}
	}
	for _, n := range c.nodes {
		if got := stored(t, n.url, run, kindRegular); len(got) != len(acked) || len(difference(acked, got)) != 0 {
			t.Errorf("%s: stores %d of the run's events, want the %d accepted", n.name, len(got), len(acked))
		}
	}
	c.logClusterStats(t)
	t.Logf("exactly once (%s): %d events from %d publishers to %d subscribers on %d nodes; last delivery %v after the last OK; %v in all",
		map[bool]string{false: "direct", true: "through HAProxy"}[viaProxy], len(acked), len(pubs), len(subs),
		len(c.nodes), waited.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// nodeOrProxy names where client i connects, for the log.
func nodeOrProxy(c *testCluster, i int, viaProxy bool) string {
	if viaProxy {
		return "haproxy"
	}
	return c.nodes[i%len(c.nodes)].name
}

// forwardedAddress: behind HAProxy (option forwardfor, the nodes trusting
// 127.0.0.1), petrel's per-address policy sees the client's address, not
// the proxy's: a client from 127.0.0.3 (blocked on every node) is told so
// and closed, one from 127.0.0.2 is served.
func forwardedAddress(t *testing.T, c *testCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok, err := dialFrom(ctx, c.proxy, "127.0.0.2")
	if err != nil {
		t.Fatalf("dial HAProxy from 127.0.0.2: %v", err)
	}
	defer ok.Close()
	if _, err := reqCheck(ctx, ok, "fwd", runFilter(newRun(), kindRegular)); err != nil {
		t.Errorf("client 127.0.0.2 through HAProxy: REQ: %v", err)
	}
	blocked, err := dialFrom(ctx, c.proxy, "127.0.0.3")
	var he *client.HandshakeError
	switch {
	case errors.As(err, &he) && he.Status == http.StatusForbidden:
		t.Logf("client 127.0.0.3 through HAProxy: upgrade refused (HTTP %d)", he.Status)
		return
	case err != nil:
		t.Fatalf("dial HAProxy from 127.0.0.3: %v", err)
	}
	defer blocked.Close()
	m, err := blocked.Next(ctx)
	if err != nil {
		t.Fatalf("client 127.0.0.3 through HAProxy: %v", err)
	}
	if m.Relay == nil || m.Relay.Type != nostr.LabelNotice || client.Prefix(m.Relay.Message) != "blocked" {
		t.Fatalf("client 127.0.0.3 through HAProxy: got %q, want a NOTICE blocked:", m.Raw)
	}
	select {
	case <-blocked.Done():
	case <-ctx.Done():
		t.Fatal("client 127.0.0.3 through HAProxy: connection not closed after the NOTICE")
	}
	t.Logf("client 127.0.0.3 through HAProxy: %q, then closed; 127.0.0.2 served", m.Relay.Message)
}
