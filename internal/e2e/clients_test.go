package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// The clients: subscribers that count what they receive, publishers that
// record every answer in a ledger, and REQ checks.

// kindRegular and kindEphemeral are the kinds the tests publish.
const (
	kindRegular   = nostr.KindTextNote
	kindEphemeral = 20001
)

// newRun returns a tag value no other test run uses: every event of a
// test carries ["t", run], and every filter asks for it.
func newRun() string {
	var b [8]byte
	rand.Read(b[:])
	return "e2e-" + hex.EncodeToString(b[:])
}

// runFilter matches the run's events of the given kinds, live only
// (limit 0).
func runFilter(run string, kinds ...int) nostr.Filter {
	return nostr.Filter{Kinds: kinds, Tags: []nostr.TagFilter{{Name: 't', Values: []string{run}}},
		Limit: 0, HasLimit: true}
}

// dialFrom connects to url from the loopback address local ("" for any).
func dialFrom(ctx context.Context, url, local string) (*client.Conn, error) {
	o := client.Options{HandshakeTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, SubBuffer: 1024}
	if local != "" {
		d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		o.NetDial = d.DialContext
	}
	return client.Dial(ctx, url, o)
}

func mustDial(t *testing.T, url string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := dialFrom(ctx, url, "")
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

// subscriber is one connection with one live subscription, counting the
// events it receives by id.
type subscriber struct {
	name string
	conn *client.Conn
	sub  *client.Sub

	mu     sync.Mutex
	got    map[nostr.ID]int
	events int    // EVENT messages, repeats included
	closed string // the relay's CLOSED message, if any
	ended  bool   // the connection ended
	done   chan struct{}
}

// subscribe connects to url, sends the REQ and waits for its EOSE, so
// that the subscription is live when it returns.
func subscribe(t *testing.T, name, url string, f nostr.Filter) *subscriber {
	t.Helper()
	s := &subscriber{name: name, conn: mustDial(t, url), got: map[nostr.ID]int{}, done: make(chan struct{})}
	sub, err := s.conn.Req("live", f)
	if err != nil {
		t.Fatalf("%s: REQ: %v", name, err)
	}
	s.sub = sub
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("%s: waiting for EOSE: %v", name, err)
		}
		if m.Type == nostr.LabelEOSE {
			break
		}
		if m.Type == nostr.LabelClosed {
			t.Fatalf("%s: CLOSED %q instead of EOSE", name, m.Message)
		}
		s.record(m)
	}
	go s.collect()
	return s
}

func (s *subscriber) record(m *nostr.RelayMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Type {
	case nostr.LabelEvent:
		s.got[m.Event.ID]++
		s.events++
	case nostr.LabelClosed:
		s.closed = m.Message
	}
}

func (s *subscriber) collect() {
	defer close(s.done)
	for m := range s.sub.Messages() {
		s.record(m)
	}
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

// hasAll reports whether every id of want has arrived.
func (s *subscriber) hasAll(want map[nostr.ID]bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range want {
		if s.got[id] == 0 {
			return false
		}
	}
	return true
}

// delivery compares what a subscriber received with what it should have.
type delivery struct {
	distinct int // distinct events received
	missing  int // in want, never received
	extra    int // received, not in want
	repeats  int // deliveries beyond the first of an event
}

func (d delivery) String() string {
	return fmt.Sprintf("%d distinct, %d missing, %d extra, %d repeated", d.distinct, d.missing, d.extra, d.repeats)
}

func (s *subscriber) compare(want map[nostr.ID]bool) delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d delivery
	d.distinct = len(s.got)
	for id := range want {
		if s.got[id] == 0 {
			d.missing++
		}
	}
	for id, n := range s.got {
		if !want[id] {
			d.extra++
		}
		d.repeats += n - 1
	}
	return d
}

func (s *subscriber) closedMessage() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed, s.ended
}

// outcome is what became of one published event.
type outcome uint8

const (
	okTrue   outcome = iota + 1 // OK true: the relay says it is stored
	okFalse                     // OK false
	noAnswer                    // the connection ended (or the wait timed out) first: stored or not
)

// sentEvent is one event a publisher sent and its outcome.
type sentEvent struct {
	ev  *nostr.Event
	pub string    // the publisher's name
	via string    // the URL it was sent to
	at  time.Time // when the outcome became known
	out outcome
	msg string // the OK message
}

// ledger records every event the test's publishers sent. Safe for
// concurrent use.
type ledger struct {
	mu   sync.Mutex
	sent map[nostr.ID]*sentEvent
}

func newLedger() *ledger { return &ledger{sent: map[nostr.ID]*sentEvent{}} }

func (l *ledger) record(e *sentEvent) {
	l.mu.Lock()
	l.sent[e.ev.ID] = e
	l.mu.Unlock()
}

// ids returns the ids whose outcome satisfies keep.
func (l *ledger) ids(keep func(*sentEvent) bool) map[nostr.ID]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[nostr.ID]bool{}
	for id, e := range l.sent {
		if keep(e) {
			out[id] = true
		}
	}
	return out
}

func (l *ledger) acked() map[nostr.ID]bool {
	return l.ids(func(e *sentEvent) bool { return e.out == okTrue })
}

// count returns the number of events with outcome o sent in [from, to)
// (zero times: unbounded).
func (l *ledger) count(o outcome, from, to time.Time) int {
	return len(l.ids(func(e *sentEvent) bool {
		return e.out == o && (from.IsZero() || !e.at.Before(from)) && (to.IsZero() || e.at.Before(to))
	}))
}

// refusals counts the OK false messages by text.
func (l *ledger) refusals() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for _, e := range l.sent {
		if e.out == okFalse {
			out[e.msg]++
		}
	}
	return out
}

// publisher publishes events on one connection, keeping up to window of
// them waiting for their OK (1: one at a time), reconnecting when the
// connection ends, until it has sent count events or stop is closed.
type publisher struct {
	name   string
	url    string // where it connects first
	redial string // where it reconnects after losing the connection ("": url)
	key    relaytest.Key
	run    string
	kind   int
	window int           // events in flight; 0: 1
	count  int           // events to send; 0: until stop
	stop   chan struct{} // closed to stop a publisher without count
	pause  time.Duration // wait after an OK false or a lost connection
	l      *ledger
	// afterOK, if set, is called after each OK true, on the publisher's
	// goroutine (the REQ-after-OK checks).
	afterOK func(ev *nostr.Event, via string)

	sent, acked, refused, lost, reconnects atomic.Int64
	err                                    error // why it gave up, if it did
	done                                   chan struct{}
}

// okWait bounds the wait for an OK: past it the event counts as
// unanswered and the connection is dropped.
const okWait = 30 * time.Second

func (p *publisher) start() *publisher {
	p.done = make(chan struct{})
	go p.loop()
	return p
}

func (p *publisher) stopped() bool {
	if p.stop == nil {
		return false
	}
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

func (p *publisher) loop() {
	defer close(p.done)
	window := max(p.window, 1)
	url := p.url
	var conn *client.Conn
	var oks chan *nostr.RelayMessage
	inflight := map[nostr.ID]*sentEvent{}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	// settle records the outcome of an event in flight.
	settle := func(e *sentEvent, out outcome, msg string) {
		delete(inflight, e.ev.ID)
		e.at, e.out, e.msg = time.Now(), out, msg
		p.l.record(e)
		switch out {
		case okTrue:
			p.acked.Add(1)
			if p.afterOK != nil {
				p.afterOK(e.ev, e.via)
			}
		case okFalse:
			p.refused.Add(1)
			time.Sleep(p.pause)
		case noAnswer:
			p.lost.Add(1)
		}
	}
	// drop ends the connection: what it answered before it ended counts,
	// the rest of what is in flight is unanswered.
	drop := func(why string) {
		conn.Close()
		<-conn.Done()
		for {
			select {
			case m := <-oks:
				if e := inflight[m.EventID]; e != nil {
					settle(e, map[bool]outcome{true: okTrue, false: okFalse}[m.OK], m.Message)
				}
				continue
			default:
			}
			break
		}
		for _, e := range inflight {
			settle(e, noAnswer, why)
		}
		conn = nil
		if p.redial != "" {
			url = p.redial
		}
		time.Sleep(p.pause)
	}
	for i := 0; ; {
		more := (p.count == 0 || i < p.count) && !p.stopped()
		if !more && len(inflight) == 0 {
			return
		}
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := dialFrom(ctx, url, "")
			cancel()
			if err != nil {
				// A dead node or a proxy with no node yet: retry for a while.
				if p.reconnects.Add(1) > 300 {
					p.err = fmt.Errorf("%s: cannot reconnect to %s: %w", p.name, url, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			conn, oks = c, make(chan *nostr.RelayMessage, window)
		}
		if more && len(inflight) < window {
			ev := p.key.Event(p.kind, fmt.Sprintf("%s #%d", p.name, i), nostr.Tags{{"t", p.run}, {"p-name", p.name}}, 0)
			i++
			e := &sentEvent{ev: ev, pub: p.name, via: url}
			inflight[ev.ID] = e
			p.sent.Add(1)
			if err := conn.SendEvent(ev, oks); err != nil {
				drop(err.Error())
			}
			continue
		}
		select {
		case m := <-oks:
			if e := inflight[m.EventID]; e != nil {
				settle(e, map[bool]outcome{true: okTrue, false: okFalse}[m.OK], m.Message)
			}
		case <-conn.Done():
			drop(fmt.Sprintf("connection ended: %v", conn.Err()))
		case <-time.After(okWait):
			drop("no OK within " + okWait.String())
		}
	}
}

// summary is the publisher's counts for the test log.
func (p *publisher) summary() string {
	return fmt.Sprintf("%s: sent %d, OK true %d, OK false %d, no answer %d, reconnect attempts %d",
		p.name, p.sent.Load(), p.acked.Load(), p.refused.Load(), p.lost.Load(), p.reconnects.Load())
}

// reqCheck runs REQ filters on conn and returns the events before EOSE.
// A CLOSED answer is returned as a *client.ClosedError.
func reqCheck(ctx context.Context, conn *client.Conn, subID string, f nostr.Filter) ([]*nostr.Event, error) {
	sub, err := conn.Req(subID, f)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	var out []*nostr.Event
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return out, err
		}
		switch m.Type {
		case nostr.LabelEvent:
			out = append(out, m.Event)
		case nostr.LabelEOSE:
			return out, nil
		case nostr.LabelClosed:
			return out, &client.ClosedError{SubID: subID, Message: m.Message}
		}
	}
}

// checker answers "does a REQ on this node find event id?" over one
// connection. Safe for concurrent use.
type checker struct {
	node string
	conn *client.Conn
	seq  atomic.Int64
}

// has runs REQ {"ids":[id]} and reports whether exactly that event came
// back before EOSE.
func (k *checker) has(id nostr.ID) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := reqCheck(ctx, k.conn, fmt.Sprintf("chk%d", k.seq.Add(1)), nostr.Filter{IDs: []nostr.ID{id}})
	if err != nil {
		return fmt.Errorf("REQ on %s for %s: %w", k.node, id, err)
	}
	if len(evs) != 1 || evs[0].ID != id {
		return fmt.Errorf("REQ on %s for %s after its OK: %d events", k.node, id, len(evs))
	}
	return nil
}

// stored returns the ids of the run's events that REQs on url find,
// paging back in time (until = the oldest created_at seen) so that any
// number of events is listed.
func stored(t *testing.T, url, run string, kinds ...int) map[nostr.ID]bool {
	t.Helper()
	conn := mustDial(t, url)
	defer conn.Close()
	out := map[nostr.ID]bool{}
	f := runFilter(run, kinds...)
	f.Limit = storedPage
	for page := 0; ; page++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		evs, err := reqCheck(ctx, conn, fmt.Sprintf("stored%d", page), f)
		cancel()
		if err != nil {
			t.Fatalf("stored events at %s: %v", url, err)
		}
		fresh := 0
		for _, ev := range evs {
			if !out[ev.ID] {
				out[ev.ID] = true
				fresh++
			}
			if !f.HasUntil || ev.CreatedAt < f.Until {
				f.Until, f.HasUntil = ev.CreatedAt, true
			}
		}
		if len(evs) < f.Limit {
			return out
		}
		if fresh == 0 {
			t.Fatalf("stored events at %s: more than %d in the second %d, cannot page past it", url, f.Limit, f.Until)
		}
	}
}

// storedPage is the page size of stored: the test nodes' relay.max_limit.
const storedPage = 10000

// difference returns the ids of a that are not in b, sorted, for messages.
func difference(a, b map[nostr.ID]bool) []string {
	var out []string
	for id := range a {
		if !b[id] {
			out = append(out, id.Hex())
		}
	}
	sort.Strings(out)
	return out
}

// firstFew shortens a list of ids for a failure message.
func firstFew(ids []string) []string {
	if len(ids) > 5 {
		return append(ids[:5:5], fmt.Sprintf("... (%d in all)", len(ids)))
	}
	return ids
}

// isClosedError reports whether err is the relay's CLOSED, and its text.
func isClosedError(err error) (string, bool) {
	var ce *client.ClosedError
	if errors.As(err, &ce) {
		return ce.Message, true
	}
	return "", false
}
