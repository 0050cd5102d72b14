package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// outage is the shortest time a test keeps a server down: past the bus's
// silence timeout (3s), so that its detection and the store polling it
// starts take part, and long enough for every publisher to be answered
// several times meanwhile.
const outage = 4 * time.Second

// holdOutage sleeps until the outage that began at down has lasted
// outage.
func holdOutage(down time.Time) {
	time.Sleep(time.Until(down.Add(outage)))
}

// pubWindow is how many events each publisher of the fault tests keeps
// waiting for their OK: a failure then finds several in flight (committed
// or not, answered or not).
const pubWindow = 8

// startPublishers starts perNode continuous publishers on every node
// (skipping the names in skip), each reconnecting to redial ("" : the
// same node) when its connection ends.
func startPublishers(c *testCluster, l *ledger, run string, perNode int, redial string, stop chan struct{}) []*publisher {
	var pubs []*publisher
	for i, n := range c.nodes {
		for j := range perNode {
			name := fmt.Sprintf("pub%d@%s", j, n.name)
			pubs = append(pubs, (&publisher{name: name, url: n.url, redial: redial,
				key: relaytest.NewKey(fmt.Sprintf("e2e-%s-%d-%d", run, i, j)), run: run, kind: kindRegular,
				window: pubWindow, stop: stop, pause: 100 * time.Millisecond, l: l}).start())
		}
	}
	return pubs
}

// ackedCounts returns each publisher's OK true count, to wait for more.
func ackedCounts(pubs []*publisher) []int64 {
	out := make([]int64, len(pubs))
	for i, p := range pubs {
		out[i] = p.acked.Load()
	}
	return out
}

// waitAcked waits until every publisher not in skip has n more OK true
// answers than in base.
func waitAcked(t *testing.T, what string, pubs []*publisher, base []int64, n int64, skip ...string) time.Duration {
	t.Helper()
	return waitFor(t, what, 90*time.Second, func() bool {
		for i, p := range pubs {
			select {
			case <-p.done:
				if p.err != nil {
					t.Fatalf("%s: %v", p.name, p.err)
				}
			default:
			}
			if !skipped(p.name, skip) && p.acked.Load() < base[i]+n {
				return false
			}
		}
		return true
	})
}

func skipped(pubName string, nodes []string) bool {
	for _, n := range nodes {
		if strings.HasSuffix(pubName, "@"+n) {
			return true
		}
	}
	return false
}

func stopPublishers(t *testing.T, stop chan struct{}, pubs []*publisher) {
	t.Helper()
	close(stop)
	for _, p := range pubs {
		<-p.done
		t.Log(p.summary())
	}
}

// expectExactlyOnce waits until every subscriber has every event of want,
// listens on for settle, and fails unless each got each exactly once and
// nothing else.
func expectExactlyOnce(t *testing.T, subs []*subscriber, want map[nostr.ID]bool) time.Duration {
	t.Helper()
	waited := waitFor(t, "every subscriber to receive every stored event", 90*time.Second, func() bool {
		for _, s := range subs {
			if !s.hasAll(want) {
				return false
			}
		}
		return true
	})
	time.Sleep(settle)
	for _, s := range subs {
		d := s.compare(want)
		t.Logf("%s: %s", s.name, d)
		if d.missing != 0 || d.extra != 0 || d.repeats != 0 {
			t.Errorf("%s: %s, want each of the %d stored events exactly once", s.name, d, len(want))
		}
		if msg, ended := s.closedMessage(); msg != "" || ended {
			t.Errorf("%s: subscription ended (CLOSED %q, connection ended %v)", s.name, msg, ended)
		}
	}
	return waited
}

// statusOf returns the state (up, down) cluster.sh status gives name.
func statusOf(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name {
			return f[1]
		}
	}
	return ""
}

// TestKillNode: kill -9 of one node of three while two publishers per node
// write. The publishers of the killed node reconnect through HAProxy; no
// event answered OK true is lost; the other nodes keep accepting, and
// their subscribers get every stored event (those the killed node
// committed without answering too) exactly once; HAProxy takes the node
// out and puts it back once restarted, and the restarted node serves.
func TestKillNode(t *testing.T) {
	c := startCluster(t, clusterOptions{nodes: 3, haproxy: true})
	const victim = "n2"
	run := newRun()
	var subs, survivors []*subscriber
	for _, n := range c.nodes {
		s := subscribe(t, "sub@"+n.name, n.url, runFilter(run, kindRegular))
		subs = append(subs, s)
		if n.name != victim {
			survivors = append(survivors, s)
		}
	}
	l := newLedger()
	stop := make(chan struct{})
	pubs := startPublishers(c, l, run, 2, c.proxy, stop)
	waitAcked(t, "every publisher to be answered", pubs, make([]int64, len(pubs)), 30)

	killAt := time.Now()
	c.kill(victim)
	atKill := ackedCounts(pubs)
	// Every publisher carries on: the survivors' on their nodes, the
	// victim's through HAProxy (refused by the dead node, redispatched).
	waitAcked(t, "every publisher to be answered after the kill", pubs, atKill, 30)
	failover := time.Since(killAt)
	down := waitFor(t, "HAProxy to take "+victim+" out", 30*time.Second, func() bool {
		st, err := c.proxyServers()
		return err == nil && strings.HasPrefix(st[victim], "DOWN")
	})
	stopPublishers(t, stop, pubs)
	if msg, ended := subs[1].closedMessage(); !ended {
		t.Errorf("the killed node's subscriber: connection still open (CLOSED %q)", msg)
	}
	if out, err := c.run(nil, "status", "--state", c.state); err == nil || statusOf(out, victim) != "down" {
		t.Errorf("cluster.sh status with %s killed: %v, want exit status 1 and %s down:\n%s", victim, err, victim, out)
	}

	c.restart(victim)
	if out, err := c.run(nil, "status", "--state", c.state); err != nil {
		t.Errorf("cluster.sh status after the restart: %v\n%s", err, out)
	}
	up := waitFor(t, "HAProxy to put "+victim+" back", 60*time.Second, func() bool {
		st, err := c.proxyServers()
		return err == nil && st[victim] == "UP"
	})

	want := stored(t, c.nodes[0].url, run, kindRegular)
	acked := l.acked()
	lostAcked := difference(acked, want)
	unknown := l.ids(func(e *sentEvent) bool { return e.out == noAnswer })
	unknownStored := len(unknown) - len(difference(unknown, want))
	t.Logf("kill -9 %s: %d events answered OK true (%d before the kill, %d after), %d unanswered when the node died (%d of them stored), %d OK false %v; %d stored; %d acknowledged events lost",
		victim, len(acked), l.count(okTrue, time.Time{}, killAt), l.count(okTrue, killAt, time.Time{}),
		len(unknown), unknownStored, l.count(okFalse, time.Time{}, time.Time{}), l.refusals(), len(want), len(lostAcked))
	t.Logf("failover: every publisher answered 30 more times %v after the kill; HAProxy marked %s DOWN after %v and UP %v after its restart",
		failover.Round(time.Millisecond), victim, (failover + down).Round(time.Millisecond), up.Round(time.Millisecond))
	if len(lostAcked) != 0 {
		t.Errorf("%d events answered OK true are not stored: %v", len(lostAcked), firstFew(lostAcked))
	}
	for _, n := range c.nodes[1:] {
		if got := stored(t, n.url, run, kindRegular); len(got) != len(want) || len(difference(want, got)) != 0 {
			t.Errorf("%s stores %d of the run's events, %s %d", n.name, len(got), c.nodes[0].name, len(want))
		}
	}
	waited := expectExactlyOnce(t, survivors, want)
	t.Logf("the survivors' subscribers had every stored event %v after the publishers stopped", waited.Round(time.Millisecond))

	// The restarted node is a full member again: events published on each
	// node reach subscribers on all three, once.
	run2 := newRun()
	var subs2 []*subscriber
	for _, n := range c.nodes {
		subs2 = append(subs2, subscribe(t, "after-restart@"+n.name, n.url, runFilter(run2, kindRegular)))
	}
	l2 := newLedger()
	for i, n := range c.nodes {
		p := (&publisher{name: "after-restart@" + n.name, url: n.url, key: relaytest.NewKey(fmt.Sprintf("e2e-r-%d", i)),
			run: run2, kind: kindRegular, count: 20, l: l2}).start()
		<-p.done
		t.Log(p.summary())
	}
	acked2 := l2.acked()
	if len(acked2) != 20*len(c.nodes) {
		t.Errorf("after the restart: OK true for %d of %d events (%v)", len(acked2), 20*len(c.nodes), l2.refusals())
	}
	expectExactlyOnce(t, subs2, acked2)
	c.logClusterStats(t)
}

// TestNATSRestart: the bus's nats-server killed mid-stream and started
// again a few seconds later, while a publisher per node writes: writes go
// on meanwhile (the bus is not on the durability path), and subscribers
// on every node end with every stored event, accepted before, during and
// after the outage, none twice.
func TestNATSRestart(t *testing.T) {
	c := startCluster(t, clusterOptions{nodes: 3, privateNATS: true})
	run := newRun()
	var subs []*subscriber
	for i := range 2 * len(c.nodes) {
		n := c.nodes[i%len(c.nodes)]
		subs = append(subs, subscribe(t, fmt.Sprintf("sub%d@%s", i, n.name), n.url, runFilter(run, kindRegular)))
	}
	l := newLedger()
	stop := make(chan struct{})
	pubs := startPublishers(c, l, run, 1, "", stop)
	waitAcked(t, "every publisher to be answered", pubs, make([]int64, len(pubs)), 30)

	downAt := time.Now()
	c.kill("nats")
	waitFor(t, "every node to notice the bus is gone", 30*time.Second, func() bool {
		for _, n := range c.nodes {
			s, err := n.stats()
			if err != nil || s.Cluster == nil || s.Cluster.Connected {
				return false
			}
		}
		return true
	})
	waitAcked(t, "writes while the bus is down", pubs, ackedCounts(pubs), 30)
	holdOutage(downAt)
	upAt := time.Now()
	c.restart("nats")
	waitFor(t, "every node back on the bus", 60*time.Second, func() bool {
		for _, n := range c.nodes {
			s, err := n.stats()
			if err != nil || s.Cluster == nil || !s.Cluster.Connected || s.Cluster.Reconnects < 1 {
				return false
			}
		}
		return true
	})
	waitAcked(t, "writes after the bus is back", pubs, ackedCounts(pubs), 30)
	stopPublishers(t, stop, pubs)

	want := stored(t, c.nodes[0].url, run, kindRegular)
	acked := l.acked()
	lostAcked := difference(acked, want)
	during := l.count(okTrue, downAt, upAt)
	t.Logf("NATS down %v: OK true %d before, %d during, %d after the outage; %d OK false %v, %d unanswered; %d stored; %d acknowledged events lost",
		upAt.Sub(downAt).Round(time.Millisecond), l.count(okTrue, time.Time{}, downAt), during, l.count(okTrue, upAt, time.Time{}),
		l.count(okFalse, time.Time{}, time.Time{}), l.refusals(), l.count(noAnswer, time.Time{}, time.Time{}), len(want), len(lostAcked))
	if during == 0 {
		t.Error("no event was accepted while the bus was down")
	}
	if len(lostAcked) != 0 {
		t.Errorf("%d events answered OK true are not stored: %v", len(lostAcked), firstFew(lostAcked))
	}
	waited := expectExactlyOnce(t, subs, want)
	t.Logf("every subscriber had every stored event %v after the publishers stopped", waited.Round(time.Millisecond))
	for _, n := range c.nodes {
		s := n.mustStats(t)
		t.Logf("%s: bus: %s", n.name, clusterSummary(s.Cluster))
		if s.Cluster.Disconnects < 1 || s.Cluster.Reconnects < 1 {
			t.Errorf("%s: disconnects %d, reconnects %d: the outage did not reach it", n.name, s.Cluster.Disconnects, s.Cluster.Reconnects)
		}
	}
}

// TestPostgresRestart: the database stopped (an immediate shutdown: a
// crash) and started again while a publisher per node writes. Meanwhile
// writes are answered OK false "error: ..." (never true), stored queries
// CLOSED "error: ...", live subscriptions stay open and ephemeral events
// still reach every node, and /stats and /metrics say the store is
// unavailable. Once it is back, writes succeed again by themselves, and
// no event answered OK true is missing from the store.
func TestPostgresRestart(t *testing.T) {
	c := startCluster(t, clusterOptions{nodes: 3, privatePostgres: true})
	run := newRun()
	var subs, ephSubs []*subscriber
	for _, n := range c.nodes {
		subs = append(subs, subscribe(t, "sub@"+n.name, n.url, runFilter(run, kindRegular)))
		ephSubs = append(ephSubs, subscribe(t, "ephemeral@"+n.name, n.url, runFilter(run, kindEphemeral)))
	}
	l := newLedger()
	stop := make(chan struct{})
	pubs := startPublishers(c, l, run, 1, "", stop)
	waitAcked(t, "every publisher to be answered", pubs, make([]int64, len(pubs)), 20)

	c.kill("pg")
	downAt := time.Now()
	waitFor(t, "every node to report the store unavailable", 60*time.Second, func() bool {
		for _, n := range c.nodes {
			s, err := n.stats()
			if err != nil || !s.StoreUnavailable {
				return false
			}
		}
		return true
	})
	waitFor(t, "refused writes on every node", 60*time.Second, func() bool {
		for _, p := range pubs {
			if p.refused.Load() < 3 {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, n := range c.nodes {
		st := n.mustStats(t)
		v, err := n.metric("petrel_store_unavailable")
		if err != nil || v != 1 {
			t.Errorf("%s: petrel_store_unavailable = %v (%v), want 1 while the database is down", n.name, v, err)
		}
		if st.StoreErrors == 0 {
			t.Errorf("%s: store_errors = 0 while the database is down", n.name)
		}
		// A stored query is refused, not answered with an empty EOSE.
		conn := mustDial(t, n.url)
		f := runFilter(run, kindRegular)
		f.Limit = 10
		_, err = reqCheck(ctx, conn, "during-outage", f)
		msg, closed := isClosedError(err)
		if !closed || client.Prefix(msg) != "error" {
			t.Errorf("%s: REQ while the database is down: %v, want CLOSED \"error: ...\"", n.name, err)
		} else {
			t.Logf("%s: store_unavailable=%v store_errors=%d petrel_store_unavailable=%v; REQ: CLOSED %q", n.name, st.StoreUnavailable, st.StoreErrors, v, msg)
		}
		// Live delivery goes on: an ephemeral event from each node reaches
		// every node's subscriber.
		ev := relaytest.NewKey(fmt.Sprintf("e2e-eph-%d", i)).Event(kindEphemeral, "while the database is down", nostr.Tags{{"t", run}}, 0)
		m, err := conn.Publish(ctx, ev)
		if err != nil || !m.OK {
			t.Errorf("%s: ephemeral event while the database is down: %v %+v", n.name, err, m)
		}
		conn.Close()
	}
	waitFor(t, "ephemeral events on every node while the database is down", 30*time.Second, func() bool {
		for _, s := range ephSubs {
			if s.compare(nil).distinct < len(c.nodes) {
				return false
			}
		}
		return true
	})
	for _, s := range append(append([]*subscriber{}, subs...), ephSubs...) {
		if msg, ended := s.closedMessage(); msg != "" || ended {
			t.Errorf("%s: live subscription ended during the outage (CLOSED %q, connection ended %v)", s.name, msg, ended)
		}
	}

	holdOutage(downAt)
	upAt := time.Now()
	atUp := ackedCounts(pubs)
	c.restart("pg")
	recovered := waitAcked(t, "writes to succeed again on every node", pubs, atUp, 1)
	waitAcked(t, "more writes on every node after the restart", pubs, ackedCounts(pubs), 20)
	waitFor(t, "every node to report the store available", 60*time.Second, func() bool {
		for _, n := range c.nodes {
			s, err := n.stats()
			if err != nil || s.StoreUnavailable {
				return false
			}
			if v, err := n.metric("petrel_store_unavailable"); err != nil || v != 0 {
				return false
			}
		}
		return true
	})
	stopPublishers(t, stop, pubs)

	want := stored(t, c.nodes[0].url, run, kindRegular)
	acked := l.acked()
	lostAcked := difference(acked, want)
	refusedIDs := l.ids(func(e *sentEvent) bool { return e.out == okFalse })
	refusedStored := len(refusedIDs) - len(difference(refusedIDs, want))
	refusals := l.refusals()
	t.Logf("PostgreSQL down %v: OK true %d before, %d during, %d after; OK false %d (%d of them stored anyway), unanswered %d; %d stored; %d acknowledged events lost; first OK true %v after the restart",
		upAt.Sub(downAt).Round(time.Millisecond), l.count(okTrue, time.Time{}, downAt), l.count(okTrue, downAt, upAt),
		l.count(okTrue, upAt, time.Time{}), len(refusedIDs), refusedStored, l.count(noAnswer, time.Time{}, time.Time{}),
		len(want), len(lostAcked), recovered.Round(time.Millisecond))
	t.Logf("refusals: %v", refusals)
	if len(lostAcked) != 0 {
		t.Errorf("%d events answered OK true are not stored: %v", len(lostAcked), firstFew(lostAcked))
	}
	// An event answered OK false may still be stored only when its
	// COMMIT went out and the crash took the reply: the postgres writer
	// asks the database what became of it (up to resolve_timeout, 5 s),
	// and past that answers "error: ... may be stored: send it again",
	// then keeps asking and fans the events out once it learns they were
	// stored (checked below: subscribers miss nothing stored).
	for msg, n := range refusals {
		if refusedStored > 0 && strings.Contains(msg, "may be stored") {
			t.Logf("%d refusals said the event may be stored: %q", n, msg)
		}
	}
	// Each refusal says why with a prefix a client acts on: error: (the
	// store failed, the commit is in doubt, or the relay's in-flight and
	// wait valves filled while the writer waited on a database the store
	// reports unreachable), or rate-limited: from those valves in the
	// moments before the store first failed to reach the database (seen
	// on a slow guest, 5 of 116 refusals, before the valves asked the
	// store). Both ask the client to send it again, which it does below,
	// and nothing acknowledged is lost (checked above).
	for msg := range refusals {
		switch p := client.Prefix(msg); {
		case p == "error":
		case p == "rate-limited" && strings.Contains(msg, "relay is at capacity"):
			t.Logf("%d refusals by the relay's capacity valves during the outage: %q", refusals[msg], msg)
		default:
			t.Errorf("a write refused with %q, want the prefix error: (or rate-limited: at capacity)", msg)
		}
	}

	// A client told OK false sends the event again (NIP-01); now the
	// database is back, each is accepted, or answered duplicate: when its
	// commit had gone through after all (its acknowledgement lost in the
	// crash).
	resend := mustDial(t, c.nodes[0].url)
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	var resentStored, resentDuplicate int
	for id := range refusedIDs {
		l.mu.Lock()
		ev := l.sent[id].ev
		l.mu.Unlock()
		m, err := resend.Publish(rctx, ev)
		switch {
		case err != nil:
			t.Fatalf("re-sending %s: %v", id, err)
		case m.OK && client.Prefix(m.Message) == "duplicate":
			resentDuplicate++
			if !want[id] {
				t.Errorf("re-sent %s: %q, but a REQ did not find it", id, m.Message)
			}
		case m.OK:
			resentStored++
			if want[id] {
				t.Errorf("re-sent %s: accepted as new (%q), but a REQ had found it", id, m.Message)
			}
			want[id], acked[id] = true, true
		default:
			t.Errorf("re-sent %s once the database was back: OK false %q", id, m.Message)
		}
	}
	t.Logf("re-sending the %d events answered OK false: %d accepted now, %d answered duplicate: (stored in the outage, answered OK false)",
		len(refusedIDs), resentStored, resentDuplicate)
	if resentDuplicate != refusedStored {
		t.Errorf("%d re-sent events answered duplicate:, %d refused events found stored", resentDuplicate, refusedStored)
	}

	// Subscribers got nothing that is not stored, every stored event, and
	// nothing twice.
	waitFor(t, "every subscriber to receive every acknowledged event", 60*time.Second, func() bool {
		for _, s := range subs {
			if !s.hasAll(acked) {
				return false
			}
		}
		return true
	})
	time.Sleep(settle)
	for _, s := range subs {
		d := s.compare(want)
		t.Logf("%s: %s (of the %d stored events; %d stored while answered OK false)", s.name, d, len(want), resentDuplicate)
		if d.extra != 0 || d.repeats != 0 || d.missing != 0 {
			t.Errorf("%s: %s: received events that are not stored, or twice, or missed acknowledged ones", s.name, d)
		}
	}
	for _, n := range c.nodes[1:] {
		if got := stored(t, n.url, run, kindRegular); len(got) != len(want) {
			t.Errorf("%s stores %d of the run's events, %s %d", n.name, len(got), c.nodes[0].name, len(want))
		}
	}
	c.logClusterStats(t)
}
