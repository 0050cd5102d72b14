package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestOptions(t *testing.T) {
	st := newFeedStore(nil)
	f := func(o Options, ok bool) {
		t.Helper()
		_, err := New(o)
		if ok && err != nil {
			t.Fatalf("New: %v", err)
		}
		if !ok && !errors.Is(err, ErrOptions) {
			t.Fatalf("New: %v, want ErrOptions", err)
		}
	}
	f(Options{URL: "nats://x", Node: "n", Feed: st}, true)
	f(Options{URL: "nats://x", Node: strings.Repeat("n", MaxNodeName), Feed: st}, true) // at the limit
	f(Options{URL: "nats://x", Node: strings.Repeat("n", MaxNodeName+1), Feed: st}, false)
	f(Options{URL: "nats://x", Node: "", Feed: st}, false)
	f(Options{Node: "n", Feed: st}, false)
	f(Options{URL: "nats://x", Node: "n"}, false)
	b, _ := New(Options{URL: "nats://x", Node: "n", Feed: st})
	if b.opts.Subject != "petrel.events" || b.opts.CatchUpMargin != 5*time.Second || b.opts.DedupMax != 1<<18 {
		t.Fatalf("defaults: %+v", b.opts)
	}
}

// TestPublishQueueLimit: the publish queue takes PublishQueue events and
// drops the next (Publish never blocks); the heartbeat then carries the
// dropped event's sequence number, and the other node catches it up.
func TestPublishQueueLimit(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	b := startNode(t, url, "b", subject, st, nil)
	alice := relaytest.NewKey("queue-alice")
	sub := subscribe(t, b, alice)

	o := fastOptions(t, url, "a", subject, st)
	o.PublishQueue = 4
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	evs := notes(alice, "queued", 5)
	res, err := st.Save(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs[:4] { // not started: nothing takes from the queue
		a.Publish(ev, res[i].Seq)
	}
	if s := a.Stats(); s.PublishDrops != 0 {
		t.Fatalf("%d drops with the queue at its limit", s.PublishDrops)
	}
	a.Publish(evs[4], res[4].Seq)
	if s := a.Stats(); s.PublishDrops != 1 {
		t.Fatalf("%d drops past the limit, want 1", s.PublishDrops)
	}
	if err := a.Start(func(*nostr.Event, uint64) {}); err != nil {
		t.Fatal(err)
	}
	sub.until(evs...)
	waitFor(t, "b's catch-ups to finish", func() bool { return idle(b.b) })
	sub.fence(b, alice)
	sub.exactlyOnce(evs...)
	if s := b.b.Stats(); s.GapsDetected != 1 || s.MessagesLost != 1 || s.CaughtUp != 1 {
		t.Errorf("b: %d gaps, %d lost, %d caught up; want 1, 1, 1", s.GapsDetected, s.MessagesLost, s.CaughtUp)
	}
}

// TestSlowConsumer: a node that does not keep up holds PendingMsgs
// messages; NATS drops the next, which is counted, and the gap it leaves
// is caught up from the store.
func TestSlowConsumer(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	quiet := func(o *Options) { o.HeartbeatInterval = time.Hour }
	a := startNode(t, url, "a", subject, st, quiet)

	o := fastOptions(t, url, "b", subject, st)
	quiet(&o)
	o.PendingMsgs = 3
	bb, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bb.Close(context.Background()) })
	r := relaytest.Start(t, relaytest.Options{Store: st, Bus: bb})
	var hold sync.Mutex // held: b's delivery blocks
	if err := bb.Start(func(ev *nostr.Event, seq uint64) {
		hold.Lock()
		hold.Unlock()
		r.Relay.Publish(ev, seq)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bb.StopDelivery)
	b := &node{name: "b", b: bb, r: r}
	waitFor(t, "b connected", func() bool { return bb.Stats().Connected })
	alice := relaytest.NewKey("slow-alice")
	sub := subscribe(t, b, alice)
	pa := relaytest.Dial(t, a.r.URL)

	hold.Lock()
	held := true
	// A failure while b's delivery is held must not hang the test's
	// cleanup (StopDelivery waits for the delivery in progress): this
	// cleanup, registered after StopDelivery's, runs before it.
	t.Cleanup(func() {
		if held {
			hold.Unlock()
		}
	})
	evs := notes(alice, "slow", 5)
	for _, ev := range evs[:3] { // one in b's handler, two waiting: at the limit
		pa.MustPublish(ev)
	}
	waitFor(t, "b to hold 3 messages", func() bool {
		n, _, _ := bb.sub.Pending()
		return n == 3
	})
	if s := bb.Stats(); s.SlowConsumerDrops != 0 {
		t.Fatalf("%d dropped at the limit", s.SlowConsumerDrops)
	}
	pa.MustPublish(evs[3]) // past it
	waitFor(t, "NATS to drop one", func() bool { return bb.Stats().SlowConsumerDrops == 1 })
	held = false
	hold.Unlock()
	pa.MustPublish(evs[4]) // shows the gap
	sub.until(evs...)
	waitFor(t, "b's catch-ups to finish", func() bool { return idle(bb) })
	sub.fence(b, alice)
	sub.exactlyOnce(evs...)
	if s := bb.Stats(); s.GapsDetected != 1 || s.MessagesLost != 1 || s.CaughtUp < 1 {
		t.Errorf("b: %d gaps, %d lost, %d caught up; want 1, 1, at least 1", s.GapsDetected, s.MessagesLost, s.CaughtUp)
	}
}

// TestStartSubscribed: Start returns once the server has the node's
// subscription, so an event another node publishes right after is
// delivered over the bus, even on a slow path to the server (each of b's
// writes reaches it 300 ms late; without the round trip, the event would
// go out while b's SUB is still on its way, and nothing would bring it
// back: a first contact is not a gap).
func TestStartSubscribed(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, nil)
	p := startProxy(t, url)
	p.slowUp.Store(int64(300 * time.Millisecond))
	bb, err := New(fastOptions(t, p.URL, "b", subject, st))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bb.Close(context.Background()) })
	r := relaytest.Start(t, relaytest.Options{Store: st, Bus: bb})
	b := &node{name: "b", b: bb, r: r}
	alice := relaytest.NewKey("subscribed-alice")
	sub := subscribe(t, b, alice)
	pa := relaytest.Dial(t, a.r.URL)
	if err := bb.Start(r.Relay.Publish); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bb.StopDelivery)
	ev := alice.Note("right after start")
	pa.MustPublish(ev)
	sub.until(ev)
	if s := bb.Stats(); s.Received != 1 || s.CatchUps != 0 {
		t.Fatalf("b: received %d over the bus, %d catch-ups; want 1, 0", s.Received, s.CatchUps)
	}
}

// TestReconnectSubscribed: after a reconnect, the outage's catch-up
// reads the store only once the server has the subscription NATS sent
// again, so an event published as soon as the node is back and caught up
// comes over the bus, on a slow path too (without the round trip, the
// catch-up would read the store before the SUB arrived, and the event,
// committed after that read and published before the SUB, would be lost:
// after a reconnect every node is taken as it is).
func TestReconnectSubscribed(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, nil)
	p := startProxy(t, url)
	b := startNode(t, p.URL, "b", subject, st, nil)
	waitConnected(t, a, b)
	alice := relaytest.NewKey("resubscribed-alice")
	sub := subscribe(t, b, alice)
	pa := relaytest.Dial(t, a.r.URL)

	p.slowUp.Store(int64(300 * time.Millisecond))
	p.Cut()
	waitFor(t, "b to see the outage", func() bool { return !b.b.Stats().Connected })
	p.Heal()
	waitFor(t, "b back and caught up", func() bool { return b.b.Stats().Connected && idle(b.b) })
	ev := alice.Note("right after the reconnect")
	pa.MustPublish(ev)
	sub.until(ev)
	sub.fence(b, alice)
	sub.exactlyOnce(ev)
	if s := b.b.Stats(); s.Received != 1 || s.CaughtUp != 0 {
		t.Fatalf("b: received %d over the bus, %d caught up; want 1, 0", s.Received, s.CaughtUp)
	}
}

// TestFirstConnectCallback: when the first connect succeeds at once,
// Start counts it, and NATS's connect callback, which runs later on its
// own goroutine, changes nothing: a message lost before it ran is still a
// gap, caught up from the store (the callback used to restart every
// node's sequence, and the loss went unseen).
func TestFirstConnectCallback(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, func(o *Options) { o.HeartbeatInterval = time.Hour })
	release, ran := make(chan struct{}), make(chan struct{})
	var dropped atomic.Int32
	b := startNode(t, url, "b", subject, st, nil, func(br *Bridge) {
		br.onFirstConnect = func(run func()) {
			<-release
			run()
			close(ran)
		}
		br.dropIn = func(e *envelope) bool {
			if e.typ == envEvent && string(e.name) == "a" && e.seq == 2 {
				dropped.Add(1)
				return true
			}
			return false
		}
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the nodes close, if the test fails first
	waitFor(t, "b connected", func() bool { return b.b.Stats().Connected })
	alice := relaytest.NewKey("first-connect-alice")
	sub := subscribe(t, b, alice)
	pa := relaytest.Dial(t, a.r.URL)
	evs := notes(alice, "first connect", 3)
	pa.MustPublish(evs[0])
	sub.until(evs[0])
	pa.MustPublish(evs[1]) // lost on the way to b
	waitFor(t, "b to lose the second", func() bool { return dropped.Load() == 1 })
	free()
	select {
	case <-ran:
	case <-time.After(relaytest.DefaultTimeout):
		t.Fatal("NATS's connect callback did not run")
	}
	pa.MustPublish(evs[2]) // shows the gap
	sub.until(evs...)
	waitFor(t, "b's catch-ups to finish", func() bool { return idle(b.b) })
	sub.fence(b, alice)
	sub.exactlyOnce(evs...)
	if s := b.b.Stats(); s.GapsDetected != 1 || s.MessagesLost != 1 {
		t.Errorf("b: %d gaps, %d lost; want 1, 1", s.GapsDetected, s.MessagesLost)
	}
}

// TestStartWithoutBus: a node that starts while the bus is down serves
// (the bus is not needed to accept events), polls the store meanwhile,
// and connects when the bus comes up.
func TestStartWithoutBus(t *testing.T) {
	t.Parallel()
	srv, subject, st := startNATS(t), testSubject(t), sharedStore(t)
	// No reconnect buffer: what a accepts while the bus is down reaches b
	// only through the store.
	a := startNode(t, srv.URL, "a", subject, st, func(o *Options) { o.ReconnectBuffer = -1 })
	srv.Kill()
	b := startNode(t, srv.URL, "b", subject, st, nil)
	alice := relaytest.NewKey("nobus-alice")
	sub := subscribe(t, b, alice)
	evs := notes(alice, "no bus", 5)
	pa := relaytest.Dial(t, a.r.URL)
	for _, ev := range evs {
		pa.MustPublish(ev)
	}
	sub.until(evs...) // polled from the store
	srv.Start()
	waitConnected(t, a, b)
	waitFor(t, "b's catch-ups to finish", func() bool { return idle(b.b) })
	last := alice.Note("over the bus")
	pa.MustPublish(last)
	sub.until(last)
	sub.fence(b, alice)
	sub.exactlyOnce(append(evs, last)...)
	if s := b.b.Stats(); s.CaughtUp != int64(len(evs)) || s.Received != 1 {
		t.Errorf("b caught up %d and received %d, want %d and 1", s.CaughtUp, s.Received, len(evs))
	}
}

// TestGoodbye: a node that closes says so; the others forget it at once
// instead of taking it for silent.
func TestGoodbye(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, nil)
	b := startNode(t, url, "b", subject, st, func(o *Options) { o.SilenceTimeout = 300 * time.Millisecond })
	waitConnected(t, a, b)
	a.b.StopDelivery()
	a.r.Stop()
	if err := a.b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to forget a", func() bool { return b.b.Stats().Origins == 0 })
	time.Sleep(600 * time.Millisecond) // longer than the silence timeout
	if s := b.b.Stats(); s.OriginsSilent != 0 || s.CatchUps != 0 {
		t.Errorf("b took a closed node for silent: %+v", s)
	}
	// Publish after Close drops.
	a.b.Publish(relaytest.NewKey("bye").Note("late"), 1)
	if s := a.b.Stats(); s.PublishDrops != 1 {
		t.Errorf("publish after close: %d drops, want 1", s.PublishDrops)
	}
}

// TestSilenceWhileBehind: a node that hears nothing, its own messages
// included (as a starved node that has fallen behind reading the bus),
// takes nobody for silent; once it hears its own messages again while
// still hearing nothing of the other, it does.
func TestSilenceWhileBehind(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	var deaf, deafToA atomic.Bool
	a := startNode(t, url, "a", subject, st, nil)
	b := startNode(t, url, "b", subject, st, func(o *Options) { o.SilenceTimeout = 300 * time.Millisecond }, func(br *Bridge) {
		br.dropIn = func(e *envelope) bool { return deaf.Load() || deafToA.Load() && string(e.name) == "a" }
	})
	waitConnected(t, a, b)
	deaf.Store(true)
	time.Sleep(time.Second) // over three silence timeouts, by the clock
	if s := b.b.Stats(); s.OriginsSilent != 0 {
		t.Fatalf("b, hearing nothing of the bus, took %d nodes for silent", s.OriginsSilent)
	}
	// b reads the bus again (its own heartbeats) but a stays unheard: a
	// is silent now.
	deafToA.Store(true)
	deaf.Store(false)
	waitFor(t, "b to take a for silent", func() bool { return b.b.Stats().OriginsSilent == 1 })
	deafToA.Store(false)
	waitFor(t, "b to hear a again", func() bool { return !b.b.lossOngoing() })
}

// TestCatchUpRetried: a catch-up that fails (the store is unreachable) is
// counted and retried until it succeeds.
func TestCatchUpRetried(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	a := startNode(t, url, "a", subject, st, nil)
	b := startNode(t, url, "b", subject, st, nil, func(br *Bridge) {
		br.dropIn = func(e *envelope) bool { return e.typ == envEvent && e.seq == 1 }
	})
	waitConnected(t, a, b)
	alice := relaytest.NewKey("retry-alice")
	sub := subscribe(t, b, alice)
	st.setFail(errors.New("store down"))
	evs := notes(alice, "retry", 2)
	pa := relaytest.Dial(t, a.r.URL)
	for _, ev := range evs {
		pa.MustPublish(ev)
	}
	waitFor(t, "a failed catch-up", func() bool { return b.b.Stats().CatchUpErrors >= 1 })
	st.setFail(nil)
	sub.until(evs...)
	waitFor(t, "b's catch-ups to finish", func() bool { return idle(b.b) })
	sub.fence(b, alice)
	sub.exactlyOnce(evs...)
}

// TestReconnectBufferLimit: while disconnected, NATS buffers publishes up
// to ReconnectBuffer bytes: the first event fits (the buffer is empty),
// the next does not and is dropped, counted; once connected, the buffered
// one goes out and the other node catches up the dropped one.
func TestReconnectBufferLimit(t *testing.T) {
	t.Parallel()
	srv, subject, st := startNATS(t), testSubject(t), sharedStore(t)
	b := startNode(t, srv.URL, "b", subject, st, nil)
	alice := relaytest.NewKey("rbuf-alice")
	sub := subscribe(t, b, alice)
	px := startProxy(t, srv.URL)
	px.Cut()
	o := fastOptions(t, px.URL, "a", subject, st)
	o.ReconnectBuffer = 1
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	if err := a.Start(func(*nostr.Event, uint64) {}); err != nil {
		t.Fatal(err)
	}
	evs := notes(alice, "buffered", 2)
	res, err := st.Save(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	a.Publish(evs[0], res[0].Seq)
	waitFor(t, "the first to be buffered", func() bool { return a.Stats().Published == 1 })
	a.Publish(evs[1], res[1].Seq)
	waitFor(t, "the second to be dropped", func() bool { return a.Stats().PublishDrops == 1 })
	px.Heal()
	sub.until(evs...)
	waitFor(t, "b's catch-ups to finish", func() bool { return idle(b.b) })
	sub.fence(b, alice)
	sub.exactlyOnce(evs...)
}

// TestDedupOverflowRepeatsNeverLoses: when the window overflows, a
// catch-up that reaches back past it hands on again what it no longer
// holds (counted as short), and loses nothing.
func TestDedupOverflowRepeatsNeverLoses(t *testing.T) {
	st := sharedStore(t)
	br, err := New(Options{URL: "nats://127.0.0.1:1", Node: "n", Feed: st, DedupMax: 2, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var got []nostr.ID
	br.deliver = func(ev *nostr.Event, _ uint64) { // as the relay's dispatcher does
		if br.FirstFanout(ev, false) {
			got = append(got, ev.ID)
		}
	}
	since := time.Now().Add(-time.Second).UnixNano()
	evs := notes(relaytest.NewKey("overflow"), "n", 3)
	res, err := st.Save(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		// Fanned out here, as the dispatcher does; the first is pushed out.
		if !br.FirstFanout(ev, true) {
			t.Fatalf("event %d: not a first fan-out", i)
		}
		br.Publish(ev, res[i].Seq)
	}
	n, err := br.runCatchUp(since)
	if err != nil {
		t.Fatal(err)
	}
	s := br.Stats()
	// Overflows: the third event's entry pushed the first out, and the
	// first's return pushed the second out.
	if n != 1 || len(got) != 1 || got[0] != evs[0].ID || s.DedupOverflows != 2 || s.DedupShort != 1 {
		t.Fatalf("handed on %d (%v); %d overflows, %d short; want the first event again, 2, 1", n, got, s.DedupOverflows, s.DedupShort)
	}
}
