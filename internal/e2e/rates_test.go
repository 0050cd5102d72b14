package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestRateLimitsAcrossNodes: one client address behind HAProxy, whose
// leastconn puts its two connections on two nodes, gets the per-address
// EVENT limit once, not once per node: the burst of 20 taken through
// both nodes is accepted, what passes it is refused "rate-limited:" on
// either. The rate refills a token in 100 s, so nothing refills while it
// runs; each node's share of what the other took is awaited in /stats
// (remote_taken) before the next step, so the figures are exact.
func TestRateLimitsAcrossNodes(t *testing.T) {
	c := startCluster(t, clusterOptions{nodes: 2, haproxy: true,
		env: []string{"PETREL_POLICY_EVENT_RATE=0.01", "PETREL_POLICY_EVENT_BURST=20"}})
	author := relaytest.NewKey("e2e rates " + newRun())
	conns := []*client.Conn{mustDial(t, c.proxy), mustDial(t, c.proxy)}
	publish := func(conn *client.Conn, n int, tag string) (ok, limited int) {
		t.Helper()
		for i := range n {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			m, err := conn.Publish(ctx, author.Note(fmt.Sprint(tag, " ", i)))
			cancel()
			switch {
			case err != nil:
				t.Fatalf("%s %d: %v", tag, i, err)
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
	// Which node each connection reached: the one whose accepted count
	// its first event raised.
	node := make([]int, len(conns))
	for i, conn := range conns {
		before := []int64{c.nodes[0].mustStats(t).EventsAccepted, c.nodes[1].mustStats(t).EventsAccepted}
		if ok, _ := publish(conn, 1, fmt.Sprint("which node ", i)); ok != 1 {
			t.Fatalf("connection %d: first event refused", i)
		}
		node[i] = -1
		for j, n := range c.nodes {
			if n.mustStats(t).EventsAccepted > before[j] {
				node[i] = j
			}
		}
	}
	if node[0] == node[1] || node[0] < 0 || node[1] < 0 {
		t.Fatalf("HAProxy put the two connections on nodes %v, want one on each", node)
	}
	remote := func(conn int) int64 { return c.nodes[node[conn]].mustStats(t).Policy.EventRateIP.Remote }
	waitRemote := func(conn int, want int64) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for remote(conn) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s took %d of the other node's tokens, want %d", c.nodes[node[conn]].name, remote(conn), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// 2 taken. 8 more through the first node: 10.
	if ok, _ := publish(conns[0], 8, "first node"); ok != 8 {
		t.Fatalf("first node accepted %d of 8 within the burst", ok)
	}
	waitRemote(1, 9)
	// The second node took 1 itself and knows of 9: 10 left of the
	// burst; 3 more are refused.
	if ok, limited := publish(conns[1], 13, "second node"); ok != 10 || limited != 3 {
		t.Fatalf("second node accepted %d and refused %d, want 10 and 3 (the burst of 20 taken through both)", ok, limited)
	}
	waitRemote(0, 11)
	if ok, limited := publish(conns[0], 1, "first node again"); ok != 0 || limited != 1 {
		t.Fatalf("first node accepted %d past the burst taken through both", ok)
	}
	for _, n := range c.nodes {
		st := n.mustStats(t)
		t.Logf("%s: limited %d, remote_taken %d, rate shares sent %d received %d", n.name,
			st.Policy.EventRateIP.Limited, st.Policy.EventRateIP.Remote, st.Cluster.RateSharesSent, st.Cluster.RateSharesReceived)
	}
}

// TestConnCapAcrossNodes: server.max_connections_per_ip holds for the
// cluster behind HAProxy, whose leastconn spreads one client's
// connections over the nodes (each node counting the client HAProxy
// names in X-Forwarded-For): with a cap of 8, eight connections from
// one address through HAProxy are admitted, the ninth is refused (429)
// whichever node it reaches, and another address still connects.
func TestConnCapAcrossNodes(t *testing.T) {
	c := startCluster(t, clusterOptions{nodes: 2, haproxy: true, env: []string{"PETREL_SERVER_MAX_CONNECTIONS_PER_IP=8"}})
	dial := func(from string) (*client.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		conn, err := dialFrom(ctx, c.proxy, from)
		if err == nil {
			t.Cleanup(conn.Close)
		}
		return conn, err
	}
	for i := range 8 {
		if _, err := dial("127.0.0.4"); err != nil {
			t.Fatalf("connection %d of 8: %v", i+1, err)
		}
	}
	// leastconn put four on each node; each hears of the other's. A
	// message may have left while the eight were opening (with two or
	// three), so wait for two more: messages go in order, and the second
	// was sent after all eight were open.
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range c.nodes {
		heard := n.mustStats(t).Cluster.ConnSharesReceived
		for st := n.mustStats(t); st.SlotsRemoteAddresses != 1 || st.Cluster.ConnSharesReceived < heard+2; st = n.mustStats(t) {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not hear of the other node's connections: %d addresses, %d messages", n.name, st.SlotsRemoteAddresses, st.Cluster.ConnSharesReceived-heard)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := n.mustStats(t).ConnectionsActive; got != 4 {
			t.Fatalf("%s holds %d of the 8 connections, want 4 (leastconn)", n.name, got)
		}
	}
	for range 2 { // refused on either node
		_, err := dial("127.0.0.4")
		var he *client.HandshakeError
		if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests {
			t.Fatalf("9th connection through HAProxy: %v, want 429", err)
		}
	}
	if _, err := dial("127.0.0.5"); err != nil {
		t.Fatalf("another address: %v", err)
	}
}
