package relay_test

// Helpers shared by the end-to-end tests (e2e_*_test.go). Every wait is
// bounded by relaytest.DefaultTimeout, which guards against hangs and is
// never a performance assertion.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
)

// barrierSeq makes barrier subscription ids unique.
var barrierSeq atomic.Int64

// barrier sends a REQ that matches nothing on c and returns every message
// that arrived before its EOSE. A connection's out-queue is FIFO, so any
// frame queued for c before the barrier's REQ was handled is in the result:
// that lets a test check that something did NOT arrive without sleeping.
// The barrier subscription is closed again.
func barrier(t testing.TB, c *relaytest.Client) []*nostr.RelayMessage {
	t.Helper()
	id := "barrier-" + strconv.FormatInt(barrierSeq.Add(1), 10)
	c.SendRaw(`["REQ","` + id + `",{"kinds":[]}]`)
	var got []*nostr.RelayMessage
	for {
		m := c.Read()
		if m.SubID == id {
			if m.Type != "EOSE" {
				t.Fatalf("barrier %s: got %s %q", id, m.Type, m.Message)
			}
			break
		}
		got = append(got, m)
	}
	c.SendRaw(`["CLOSE","` + id + `"]`)
	return got
}

// expectQuiet runs a barrier and fails if anything arrived before it.
func expectQuiet(t testing.TB, c *relaytest.Client) {
	t.Helper()
	for _, m := range barrier(t, c) {
		t.Fatalf("unexpected message: %s", describe(m))
	}
}

// describe renders a relay message for failure output.
func describe(m *nostr.RelayMessage) string {
	s := m.Type
	if m.SubID != "" {
		s += " sub=" + m.SubID
	}
	if m.Type == "OK" {
		s += fmt.Sprintf(" id=%.12s ok=%v", m.EventID.Hex(), m.OK)
	}
	if m.Message != "" {
		s += fmt.Sprintf(" msg=%q", m.Message)
	}
	if m.Event != nil {
		s += fmt.Sprintf(" event=%.12s kind=%d", m.Event.ID.Hex(), m.Event.Kind)
	}
	return s
}

// waitFor polls cond until it holds; the timeout is a hang guard.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(relaytest.DefaultTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// publishAll sends events on c keeping at most window EVENTs awaiting their
// OK (pipelining), and returns the OK of each event by id. Other messages
// arriving on c are returned in order in rest.
func publishAll(t testing.TB, c *relaytest.Client, events []*nostr.Event, window int) (oks map[nostr.ID]*nostr.RelayMessage, rest []*nostr.RelayMessage) {
	t.Helper()
	oks = make(map[nostr.ID]*nostr.RelayMessage, len(events))
	want := make(map[nostr.ID]bool, len(events))
	sent, outstanding := 0, 0
	for sent < len(events) || outstanding > 0 {
		if sent < len(events) && outstanding < window {
			ev := events[sent]
			want[ev.ID] = true
			c.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
			sent++
			outstanding++
			continue
		}
		m := c.Read()
		if m.Type == "OK" && want[m.EventID] && oks[m.EventID] == nil {
			oks[m.EventID] = m
			outstanding--
			continue
		}
		rest = append(rest, m)
	}
	return oks, rest
}

// mustAllOK fails unless every event got OK true.
func mustAllOK(t testing.TB, events []*nostr.Event, oks map[nostr.ID]*nostr.RelayMessage) {
	t.Helper()
	for _, ev := range events {
		m := oks[ev.ID]
		if m == nil || !m.OK {
			t.Fatalf("event %.12s: OK %+v", ev.ID.Hex(), m)
		}
	}
}

// seed stores events directly (bypassing the relay) and fails unless each
// was stored: a cheap way to fill the store for query tests.
func seed(t testing.TB, r *relaytest.Relay, events []*nostr.Event) {
	t.Helper()
	res, err := r.Store.Save(context.Background(), events)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	for i, rs := range res {
		if rs.Outcome.String() != "stored" {
			t.Fatalf("seed event %d: %s %v", i, rs.Outcome, rs.Err)
		}
	}
}

// storedCount returns the number of events in r's store.
func storedCount(t testing.TB, r *relaytest.Relay) int64 {
	t.Helper()
	n, err := r.Store.Count(context.Background(), []nostr.Filter{{}})
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// trips returns how often the named limit tripped.
func trips(r *relaytest.Relay, name string) int64 {
	v, ok := r.Stats().LimitTrips[name]
	if !ok {
		panic("no limit counter named " + name)
	}
	return v
}

// notes makes n kind-1 notes by k with distinct, decreasing created_at
// (newest first), all in the past.
func notes(k relaytest.Key, n int, tag string) []*nostr.Event {
	now := time.Now().Unix()
	out := make([]*nostr.Event, n)
	for i := range out {
		out[i] = k.Event(nostr.KindTextNote, fmt.Sprintf("%s %d", tag, i), nostr.Tags{{"t", tag}}, now-int64(i)-1)
	}
	return out
}

// idSet returns the events' ids as a set.
func idSet(events []*nostr.Event) map[nostr.ID]bool {
	s := make(map[nostr.ID]bool, len(events))
	for _, ev := range events {
		s[ev.ID] = true
	}
	return s
}

// idsJSON renders ids as a JSON array of hex strings.
func idsJSON(events []*nostr.Event) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, ev := range events {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + ev.ID.Hex() + `"`)
	}
	b.WriteByte(']')
	return b.String()
}

// authorFilter is a filter on one author.
func authorFilter(k relaytest.Key, extra string) string {
	f := `{"authors":["` + k.PK.Hex() + `"]`
	if extra != "" {
		f += "," + extra
	}
	return f + "}"
}

// checkNewestFirst fails unless events are ordered created_at descending,
// ties by id ascending.
func checkNewestFirst(t testing.TB, events []*nostr.Event) {
	t.Helper()
	for i := 1; i < len(events); i++ {
		a, b := events[i-1], events[i]
		if a.CreatedAt < b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.ID.Hex() > b.ID.Hex()) {
			t.Fatalf("order: event %d (%d %.12s) before event %d (%d %.12s)", i-1, a.CreatedAt, a.ID.Hex(), i, b.CreatedAt, b.ID.Hex())
		}
	}
}

// getHTTP fetches path from r with optional headers and returns the
// response and its body.
func getHTTP(t testing.TB, r *relaytest.Relay, method, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.HTTPURL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// No keep-alive: an idle kept-alive connection would hold a slot.
	cl := &http.Client{Timeout: relaytest.DefaultTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, body
}

// statsJSON fetches /stats and decodes it into a generic map.
func statsJSON(t testing.TB, r *relaytest.Relay) map[string]any {
	t.Helper()
	m, err := tryStatsJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tryStatsJSON is statsJSON returning the error (a connection cap may
// refuse the request).
func tryStatsJSON(r *relaytest.Relay) (map[string]any, error) {
	cl := &http.Client{Timeout: relaytest.DefaultTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get(r.HTTPURL() + "/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("/stats: %s", resp.Status)
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("/stats: %w", err)
	}
	return m, nil
}

// slotsActive returns /stats connection_slots_active, not counting the
// connection that asks.
func slotsActive(t testing.TB, r *relaytest.Relay) int {
	t.Helper()
	return int(statsJSON(t, r)["connection_slots_active"].(float64)) - 1
}

// laggingStore delays the commit callback of chosen events, as a busy
// writer or dispatcher would, and can pause a query after its first record.
type laggingStore struct {
	store.Store
	mu        sync.Mutex
	hold      map[nostr.ID]chan struct{} // Submit's done waits for this
	holdAll   chan struct{}              // if set, every done waits for this
	pauseNext chan struct{}              // the next Query pauses after one record until closed
	emitted   chan struct{}              // closed when the paused query yielded its record
	// blockSubmit, if set, makes Submit itself wait for it (holding the
	// verifier that called it), after sending on submitEntered.
	blockSubmit   chan struct{}
	submitEntered chan struct{}
	// unavailable is what Unavailable reports (store.Availability), as a
	// store whose database is down does.
	unavailable atomic.Bool
}

func (s *laggingStore) Unavailable() bool { return s.unavailable.Load() }

func (s *laggingStore) Submit(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	s.mu.Lock()
	gate := s.hold[ev.ID]
	if gate == nil {
		gate = s.holdAll
	}
	block, entered := s.blockSubmit, s.submitEntered
	s.mu.Unlock()
	if block != nil {
		entered <- struct{}{}
		<-block
	}
	if gate == nil {
		return s.Store.Submit(ctx, ev, done)
	}
	return s.Store.Submit(ctx, ev, func(res store.SaveResult) {
		go func() { <-gate; done(res) }()
	})
}

func (s *laggingStore) Query(ctx context.Context, filters []nostr.Filter) (store.Iterator, error) {
	it, err := s.Store.Query(ctx, filters)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	gate, emitted := s.pauseNext, s.emitted
	s.pauseNext = nil
	s.mu.Unlock()
	if gate == nil {
		return it, nil
	}
	return &pausingIterator{Iterator: it, gate: gate, emitted: emitted}, nil
}

type pausingIterator struct {
	store.Iterator
	n       int
	gate    chan struct{}
	emitted chan struct{}
}

func (it *pausingIterator) Next() bool {
	it.n++
	if it.n == 2 {
		close(it.emitted)
		<-it.gate
	}
	return it.Iterator.Next()
}

// startLagging starts a relay over a laggingStore wrapping the default
// test store.
func startLagging(t testing.TB, opts relaytest.Options) (*relaytest.Relay, *laggingStore) {
	t.Helper()
	inner, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() }) // after the relay's shutdown
	ls := &laggingStore{Store: inner, hold: map[nostr.ID]chan struct{}{}}
	opts.Store = ls
	return relaytest.Start(t, opts), ls
}
