package relay_test

// Slow consumers and the output bounds: per-connection out-queues (frames
// and bytes), pending stored-query bytes per connection and relay-wide, and
// stored-query time slices. Memory bounds are asserted on the relay's queue
// accounting (Relay.QueueStats), never on wall time.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
)

// Transport bound: the out-queue hands bytes to the transport while it
// holds less than 64 KiB, at most 256 KiB (or one marker run, at most
// 64 KiB plus a frame) at a time.
const transportBound = 64<<10 + 256<<10 + 128<<10

// overflowBytes returns an amount of output that surely exceeds what the
// kernel can buffer between the relay and a client that does not read
// (the relay's socket send buffer, at most net.ipv4.tcp_wmem's maximum,
// plus the client's small receive buffer) plus extra, the relay-side
// queues: twice that, so a test that must see a queue fill does not
// depend on how much the kernel happened to take.
func overflowBytes(t testing.TB, extra int) int {
	t.Helper()
	wmemMax := 4 << 20
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if v, err := strconv.Atoi(f[2]); err == nil {
				wmemMax = v
			}
		}
	}
	return 2 * (wmemMax + 64<<10 + transportBound + extra)
}

// sizeFor returns the content size that makes n events carry total bytes,
// at least min; it skips the test if events would exceed max bytes.
func sizeFor(t testing.TB, total, n, min, max int) int {
	t.Helper()
	size := total/n + 1
	if size < min {
		size = min
	}
	if size > max {
		t.Skipf("the kernel buffers more than %d events of %d bytes can fill", n, max)
	}
	return size
}

// bigNotes makes n kind-1 notes by k with content of size bytes, newest
// first.
func bigNotes(k relaytest.Key, n, size int, tag string) []*nostr.Event {
	return bigEvents(k, nostr.KindTextNote, n, size, tag)
}

// bigEvents makes n events of kind by k with content of size bytes and
// distinct created_at, newest first. Signing is spread over the CPUs.
func bigEvents(k relaytest.Key, kind, n, size int, tag string) []*nostr.Event {
	now := time.Now().Unix()
	pad := strings.Repeat("p", size)
	out := make([]*nostr.Event, n)
	var wg sync.WaitGroup
	workers := runtime.NumCPU()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				out[i] = k.Event(kind, fmt.Sprintf("%s %d %s", tag, i, pad), nostr.Tags{{"t", tag}}, now-int64(i)-1)
			}
		}(w)
	}
	wg.Wait()
	return out
}

// sendReq sends a REQ without waiting for anything (for clients that do
// not read).
func sendReq(t testing.TB, c *relaytest.Client, subID, filter string) {
	t.Helper()
	c.SendRaw(`["REQ","` + subID + `",` + filter + `]`)
}

// TestSlowConsumerNeverReads: a subscriber that never reads, with a live
// subscription, while another client publishes 10,000 events. The
// publisher is never slowed down (every OK arrives, true), the slow
// subscription is dropped (buffers_dropped, out_queue trip), and the
// relay's queues for the slow connection stay within their bounds.
func TestSlowConsumerNeverReads(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{}) // 4096 frames, 1 MiB
	cfg := r.Relay.Config()
	alice := relaytest.NewKey("slow-never")
	slow, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{NoRead: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	sendReq(t, slow, "live", authorFilter(alice, ""))
	waitFor(t, "the subscription", func() bool { return r.Stats().SubscriptionsActive == 1 })

	// Ephemeral events: the fan-out path without the store's cost, and
	// more output than the out-queue plus everything the kernel can
	// buffer.
	size := sizeFor(t, overflowBytes(t, cfg.OutQueueBytes), 10000, 1000, 60000)
	evs := bigEvents(alice, 20001, 10000, size, "slow")
	pub := relaytest.Dial(t, r.URL)
	oks, rest := publishAll(t, pub, evs, 256)
	mustAllOK(t, evs, oks)
	if len(rest) != 0 {
		t.Fatalf("publisher got %s", describe(rest[0]))
	}
	st := r.Stats()
	t.Logf("%d events delivered before the drop", st.Deliveries)
	if st.BuffersDropped != 1 || trips(r, "out_queue") != 1 {
		t.Fatalf("buffers_dropped = %d, out_queue trips = %d, want 1 and 1", st.BuffersDropped, trips(r, "out_queue"))
	}
	if st.SubscriptionsActive != 0 {
		t.Fatalf("subscriptions_active = %d: the slow subscription was not closed", st.SubscriptionsActive)
	}
	q := r.Relay.QueueStats()
	t.Logf("queue peaks: %+v", q)
	if q.PeakLiveFrames > cfg.OutQueueFrames || q.PeakLiveBytes > cfg.OutQueueBytes {
		t.Fatalf("live queue peaked at %d frames / %d bytes, bounds %d / %d", q.PeakLiveFrames, q.PeakLiveBytes, cfg.OutQueueFrames, cfg.OutQueueBytes)
	}
	if q.PeakTransportBytes > transportBound {
		t.Fatalf("transport held %d bytes, bound %d", q.PeakTransportBytes, transportBound)
	}
	if q.PeakControlBytes > 4*cfg.OutQueueBytes {
		t.Fatalf("control queue peaked at %d bytes", q.PeakControlBytes)
	}
	expectWorks(t, pub)
}

// TestSlowConsumerReadsLater: a subscriber that stops reading, overflows,
// then reads again gets its events up to the CLOSED "error: slow
// consumer" frame, and its connection still works.
func TestSlowConsumerReadsLater(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{OutQueueFrames: 200}})
	alice := relaytest.NewKey("slow-later")
	slow, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Paused: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	sendReq(t, slow, "live", authorFilter(alice, ""))
	waitFor(t, "the subscription", func() bool { return r.Stats().SubscriptionsActive == 1 })
	size := sizeFor(t, overflowBytes(t, 200*1100), 5000, 1000, 60000)
	evs := bigEvents(alice, 20001, 5000, size, "later")
	pub := relaytest.Dial(t, r.URL)
	oks, _ := publishAll(t, pub, evs, 256)
	mustAllOK(t, evs, oks)
	if v := r.Stats().BuffersDropped; v != 1 {
		t.Fatalf("buffers_dropped = %d, want 1", v)
	}
	if q := r.Relay.QueueStats(); q.PeakLiveFrames > 200 {
		t.Fatalf("live queue peaked at %d frames, bound 200", q.PeakLiveFrames)
	}

	slow.Resume()
	if m := slow.ExpectType("EOSE"); m.SubID != "live" {
		t.Fatalf("EOSE %q", m.SubID)
	}
	want := idSet(evs)
	n := 0
	for {
		m := slow.Read()
		if m.Type == "CLOSED" {
			if m.SubID != "live" || !strings.HasPrefix(m.Message, "error: slow consumer") {
				t.Fatalf("CLOSED %q %q", m.SubID, m.Message)
			}
			break
		}
		if m.Type != "EVENT" || m.SubID != "live" || !want[m.Event.ID] {
			t.Fatalf("before CLOSED: %s", describe(m))
		}
		delete(want, m.Event.ID)
		n++
	}
	if n == 0 || n == len(evs) {
		t.Fatalf("%d events before CLOSED, want some but not all", n)
	}
	t.Logf("%d of %d events delivered before CLOSED", n, len(evs))
	expectWorks(t, slow)
	// It can subscribe again (with since, as the CLOSED message suggests).
	slow.Req("again", authorFilter(alice, `"limit":1`))
}

// TestOutQueueFramesWhileHeld: live events matched while a subscription's
// stored query runs are held until EOSE; they count against the live
// frame bound (N held: fine, N+1: the subscription is closed), so the
// queue never exceeds it when they are released.
func TestOutQueueFramesWhileHeld(t *testing.T) {
	t.Parallel()
	const n = 100
	r, ls := startLagging(t, relaytest.Options{Relay: relay.Config{OutQueueFrames: n}})
	alice := relaytest.NewKey("held-frames")
	pub := relaytest.Dial(t, r.URL)
	pub.MustPublish(alice.Event(1, "stored 1", nil, time.Now().Unix()-100))
	pub.MustPublish(alice.Event(1, "stored 2", nil, time.Now().Unix()-101))

	f := func(count int, wantClosed bool) {
		t.Helper()
		sub := relaytest.Dial(t, r.URL)
		gate, emitted := make(chan struct{}), make(chan struct{})
		ls.mu.Lock()
		ls.pauseNext, ls.emitted = gate, emitted
		ls.mu.Unlock()
		sendReq(t, sub, "s", authorFilter(alice, ""))
		<-emitted // the stored query is paused after one record
		evs := notes(alice, count, fmt.Sprintf("held %d", count))
		oks, _ := publishAll(t, pub, evs, 64)
		mustAllOK(t, evs, oks)
		dropped := r.Stats().BuffersDropped
		close(gate)
		// Up to the subscription's EOSE or CLOSED (the query resumes on
		// its own worker: a barrier alone could overtake it), then what
		// followed it.
		var msgs []*nostr.RelayMessage
		for {
			m := sub.Read()
			msgs = append(msgs, m)
			if m.SubID == "s" && m.Type != "EVENT" {
				break
			}
		}
		msgs = append(msgs, barrier(t, sub)...)
		var stored, live int
		closed, eose := false, false
		for _, m := range msgs {
			switch {
			case m.Type == "EVENT" && !eose && !closed:
				stored++
			case m.Type == "EOSE":
				eose = true
			case m.Type == "EVENT" && eose:
				live++
			case m.Type == "CLOSED" && strings.HasPrefix(m.Message, "error: slow consumer"):
				closed = true
			default:
				t.Fatalf("unexpected %s", describe(m))
			}
		}
		if wantClosed {
			if !closed || eose || dropped != 1 {
				t.Fatalf("%d held: closed=%v eose=%v dropped=%d, want CLOSED, no EOSE, 1 drop", count, closed, eose, dropped)
			}
		} else if closed || !eose || live != count || stored != 2 || dropped != 0 {
			t.Fatalf("%d held: closed=%v eose=%v stored=%d live=%d dropped=%d", count, closed, eose, stored, live, dropped)
		}
		if q := r.Relay.QueueStats(); q.PeakLiveFrames > n {
			t.Fatalf("%d held: live queue peaked at %d frames, bound %d", count, q.PeakLiveFrames, n)
		}
	}
	f(n, false)
	f(n+1, true)
}

// TestQueryBytesPerConn: a client that does not read while a big REQ
// runs: the query pauses at the per-connection budget (the queue never
// holds more than the budget plus one frame), and once the client reads
// it gets every event and EOSE.
func TestQueryBytesPerConn(t *testing.T) {
	t.Parallel()
	const budget = 256 << 10
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{QueryBytesPerConn: budget}})
	alice := relaytest.NewKey("query-bytes")
	size := sizeFor(t, overflowBytes(t, budget), 500, 20000, 60000)
	evs := bigNotes(alice, 500, size, "qb") // newest first
	seed(t, r, evs)
	c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Paused: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	sendReq(t, c, "big", authorFilter(alice, ""))
	waitFor(t, "the query to pause", func() bool { return trips(r, "query_bytes_per_conn") >= 1 })
	q := r.Relay.QueueStats()
	t.Logf("queue peaks: %+v, stored sent %d", q, r.Stats().StoredSent)
	if frame := size + 1000; q.PeakStoredBytes > budget+frame {
		t.Fatalf("stored-query queue peaked at %d bytes, budget %d", q.PeakStoredBytes, budget)
	}
	if v, frame := r.Stats().QueryBytesQueued, int64(size+1000); v > budget+frame {
		t.Fatalf("query_bytes_queued = %d, budget %d", v, budget)
	}
	if q.PeakTransportBytes > transportBound {
		t.Fatalf("transport held %d bytes", q.PeakTransportBytes)
	}
	if sent := r.Stats().StoredSent; sent >= int64(len(evs)) {
		t.Fatalf("all %d events were queued for a client that does not read", sent)
	}
	c.Resume()
	got := c.UntilEOSE("big")
	if len(got) != len(evs) {
		t.Fatalf("got %d events, want %d", len(got), len(evs))
	}
	for i := range got {
		if got[i].ID != evs[i].ID {
			t.Fatalf("event %d out of order", i)
		}
	}
	waitFor(t, "query bytes to drain", func() bool { return r.Stats().QueryBytesQueued == 0 })
	expectWorks(t, c)
}

// TestQueryBytesTotal: two clients that do not read, each running a big
// REQ, against a relay-wide budget smaller than their per-connection
// budgets: the total stays within the relay-wide budget plus one frame per
// query worker, and both complete once they read.
func TestQueryBytesTotal(t *testing.T) {
	t.Parallel()
	const total = 512 << 10
	cfg := relay.Config{QueryBytesTotal: total, QueryWorkers: 2}
	r := relaytest.Start(t, relaytest.Options{Relay: cfg})
	alice := relaytest.NewKey("query-total")
	size := sizeFor(t, overflowBytes(t, total), 500, 20000, 60000) // per client
	evs := bigNotes(alice, 500, size, "qt")
	seed(t, r, evs)
	var cs []*relaytest.Client
	for i := 0; i < 2; i++ {
		c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Paused: true, ReadBuffer: 4096})
		if err != nil {
			t.Fatal(err)
		}
		sendReq(t, c, "big", authorFilter(alice, ""))
		cs = append(cs, c)
	}
	waitFor(t, "the queries to pause", func() bool { return trips(r, "query_bytes_total") >= 1 })
	q := r.Relay.QueueStats()
	t.Logf("queue peaks: %+v", q)
	if frame := int64(size + 1000); q.PeakQueryBytesTotal > total+2*frame {
		t.Fatalf("stored-query bytes peaked at %d relay-wide, budget %d", q.PeakQueryBytesTotal, total)
	}
	for _, c := range cs {
		c.Resume()
	}
	for i, c := range cs {
		if got := c.UntilEOSE("big"); len(got) != len(evs) {
			t.Fatalf("client %d: got %d events, want %d", i, len(got), len(evs))
		}
	}
	waitFor(t, "query bytes to drain", func() bool { return r.Stats().QueryBytesQueued == 0 })
}

// endlessStore answers queries for kind 30999 with an endless stream of
// one stored record, a little at a time: a query that never ends on its
// own. Other queries go to the wrapped store.
type endlessStore struct {
	store.Store
	rec store.Record
}

func (s *endlessStore) Query(ctx context.Context, filters []nostr.Filter) (store.Iterator, error) {
	if len(filters) == 1 && len(filters[0].Kinds) == 1 && filters[0].Kinds[0] == 30999 {
		return &endlessIterator{rec: s.rec}, nil
	}
	return s.Store.Query(ctx, filters)
}

type endlessIterator struct {
	rec    store.Record
	closed bool
}

func (it *endlessIterator) Next() bool {
	if it.closed {
		return false
	}
	time.Sleep(50 * time.Microsecond) // a slow store, not a timing assertion
	return true
}
func (it *endlessIterator) Record() *store.Record { return &it.rec }
func (it *endlessIterator) Err() error            { return nil }
func (it *endlessIterator) Close() error          { it.closed = true; return nil }

func (it *endlessIterator) Snapshot() store.Snapshot { return store.Snapshot{} }

// TestQueryTimeSlice: with one query worker, a REQ that never ends and a
// small REQ: the small one's EOSE arrives, which is only possible if the
// endless query yields its worker.
func TestQueryTimeSlice(t *testing.T) {
	t.Parallel()
	inner, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	alice := relaytest.NewKey("slice")
	ev := alice.Note("repeated forever")
	es := &endlessStore{Store: inner, rec: store.Record{ID: ev.ID, PubKey: ev.PubKey, CreatedAt: ev.CreatedAt, Kind: ev.Kind, Raw: ev.Raw}}
	r := relaytest.Start(t, relaytest.Options{Store: es, Relay: relay.Config{QueryWorkers: 1}})
	small := alice.Note("small")
	relaytest.Dial(t, r.URL).MustPublish(small)

	huge := relaytest.Dial(t, r.URL)
	sendReq(t, huge, "huge", `{"kinds":[30999]}`)
	if m := huge.ExpectType("EVENT"); m.SubID != "huge" {
		t.Fatalf("huge: %s", describe(m))
	}
	c := relaytest.Dial(t, r.URL)
	for i := 0; i < 3; i++ {
		got := c.Req(fmt.Sprintf("small%d", i), authorFilter(alice, `"kinds":[1]`))
		if len(got) != 1 || got[0].ID != small.ID {
			t.Fatalf("small REQ: %d events", len(got))
		}
	}
	// The endless query is still running: stop it. Whatever it queued
	// before the CLOSE was handled arrives before a barrier; nothing after.
	huge.SendRaw(`["CLOSE","huge"]`)
	for _, m := range barrier(t, huge) {
		if m.Type != "EVENT" || m.SubID != "huge" {
			t.Fatalf("huge: %s", describe(m))
		}
	}
	expectQuiet(t, huge)
	waitFor(t, "only the small subscriptions", func() bool { return r.Stats().SubscriptionsActive == 3 })
}
