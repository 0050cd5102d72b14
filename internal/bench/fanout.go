package bench

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// fanSub is one fanout subscriber. Its reader goroutine owns seen; the
// scenario reads seen only after the reader has stopped.
type fanSub struct {
	id    string
	slow  bool
	seen  []uint64 // bit i: event i delivered live
	eose  atomic.Bool
	ended chan struct{} // closed at EOSE or CLOSED
	gone  atomic.Bool   // CLOSED received

	received   atomic.Int64 // distinct live deliveries of known events
	duplicated atomic.Int64
	unexpected atomic.Int64
	stored     atomic.Int64 // events before EOSE
	closedMsg  atomic.Pointer[string]
}

// deliveryClock records delivery latencies and the last delivery time for
// a set of subscribers.
type deliveryClock struct {
	tr      *okTracker
	stripes [16]LockedHist
	fromOK  [16]LockedHist // from the event's OK (0 when the delivery came first)
	early   atomic.Int64   // deliveries handled before their event's OK
	last    atomic.Int64   // nanoseconds since tr.base
	total   atomic.Int64
	prog    atomic.Int64 // unix nanos of the last delivery
}

func (d *deliveryClock) record(stripe, i int, at time.Time) {
	off := at.Sub(d.tr.base)
	if sent, ok := d.tr.sentOffset(i); ok {
		d.stripes[stripe%len(d.stripes)].Record(int64(off - sent))
	}
	if okAt, ok := d.tr.okOffset(i); ok && off > okAt {
		d.fromOK[stripe%len(d.fromOK)].Record(int64(off - okAt))
	} else {
		// Delivered before the publisher's OK was handled: the latency
		// from OK is at most zero.
		d.fromOK[stripe%len(d.fromOK)].Record(0)
		d.early.Add(1)
	}
	for {
		last := d.last.Load()
		if int64(off) <= last || d.last.CompareAndSwap(last, int64(off)) {
			break
		}
	}
	d.total.Add(1)
	d.prog.Store(time.Now().UnixNano())
}

func (d *deliveryClock) hist() *Hist { return mergeStripes(&d.stripes) }

func (d *deliveryClock) histFromOK() *Hist { return mergeStripes(&d.fromOK) }

func mergeStripes(s *[16]LockedHist) *Hist {
	var h Hist
	for i := range s {
		h.Merge(s[i].Snapshot())
	}
	return &h
}

// handle is the subscriber's message handler.
func (s *fanSub) handle(r *runner, k int, d *deliveryClock, m *nostr.RelayMessage, at time.Time) bool {
	if s.slow {
		time.Sleep(r.o.SlowReadDelay)
	}
	if m.SubID != s.id {
		return false
	}
	switch m.Type {
	case nostr.LabelEvent:
		if !s.eose.Load() {
			s.stored.Add(1)
			return true
		}
		i, ok := d.tr.set.Index(eventID(m))
		if !ok {
			s.unexpected.Add(1)
			return true
		}
		w, b := i/64, uint64(1)<<(i%64)
		if s.seen[w]&b != 0 {
			s.duplicated.Add(1)
			return true
		}
		s.seen[w] |= b
		s.received.Add(1)
		d.record(k, i, at)
	case nostr.LabelEOSE:
		if s.eose.CompareAndSwap(false, true) {
			close(s.ended)
		}
	case nostr.LabelClosed:
		msg := m.Message
		s.closedMsg.Store(&msg)
		s.gone.Store(true)
		r.countClosed(msg)
		if s.eose.CompareAndSwap(false, true) {
			close(s.ended)
		}
	default:
		return false
	}
	return true
}

// eventID returns the id of an EVENT message read with or without
// DialConfig.FastEvents.
func eventID(m *nostr.RelayMessage) nostr.ID {
	if m.Event != nil {
		return m.Event.ID
	}
	return m.EventID
}

// subscribeFrame builds ["REQ",<id>,<filter>].
func subscribeFrame(id, filter string) []byte {
	b := []byte(`["REQ",`)
	b = nostr.AppendString(b, id)
	b = append(b, ',')
	b = append(b, filter...)
	return append(b, ']')
}

// authorsFilter returns {"kinds":[1],"authors":[...],"since":since,"limit":0}
// (since omitted when negative, limit when negative).
func authorsFilter(pubs []nostr.PubKey, since int64, limit int) string {
	var b strings.Builder
	b.WriteString(`{"kinds":[1],"authors":[`)
	for i, p := range pubs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(p.Hex())
		b.WriteByte('"')
	}
	b.WriteByte(']')
	if since >= 0 {
		b.WriteString(`,"since":` + strconv.FormatInt(since, 10))
	}
	if limit >= 0 {
		b.WriteString(`,"limit":` + strconv.Itoa(limit))
	}
	b.WriteByte('}')
	return b.String()
}

// Fanout opens Options.Subs subscriptions that match the bench's events
// (kind 1 by the bench's authors since the first event's created_at,
// limit 0), waits for every EOSE, publishes Options.Events events over
// Options.Pubs connections, and counts every live delivery per subscriber
// until each has every accepted event or the deadline passes.
func Fanout(o Options) (*Result, error) {
	r, err := newRunner(ScenarioFanout, o)
	if err != nil {
		return nil, err
	}
	o = r.o
	r.param("events", o.Events)
	r.param("subs", o.Subs)
	r.param("pubs", o.Pubs)
	r.param("window", o.Window)
	if o.SubURL != "" {
		r.param("sub_url", o.SubURL)
	}
	if o.Rate > 0 {
		r.param("rate", o.Rate)
	}
	if o.SlowSubs > 0 {
		r.param("slow_subs", o.SlowSubs)
		r.param("slow_read_delay", o.SlowReadDelay.String())
	}
	g := r.generator(ScenarioFanout, o.Events)
	set, err := r.signFrames(g, 0, o.Events)
	if err != nil {
		return nil, err
	}
	tr := newOKTracker(set)
	d := &deliveryClock{tr: tr}
	filter := authorsFilter(g.Authors(), g.CreatedAt(0), 0)
	r.res.Params["filter"] = `{"kinds":[1],"authors":[<` + strconv.Itoa(len(g.Authors())) + ` bench authors>],"since":` + strconv.FormatInt(g.CreatedAt(0), 10) + `,"limit":0}`

	subs := make([]*fanSub, o.Subs)
	for k := range subs {
		subs[k] = &fanSub{id: "fan" + strconv.Itoa(k), seen: make([]uint64, (set.Len()+63)/64),
			ended: make(chan struct{}), slow: k < o.SlowSubs}
	}
	var subscribed atomic.Int64
	stop := r.phase("subscribing", int64(o.Subs), subscribed.Load)
	conns, ok := r.dialMany(o.Subs, func(k int) DialConfig {
		if subs[k].slow {
			return DialConfig{URL: o.SubURL, ReadBuffer: o.SlowReadBuffer, BufferSize: 4096, FastEvents: true}
		}
		return DialConfig{URL: o.SubURL, FastEvents: true}
	}, func(k int) func(*nostr.RelayMessage, time.Time) bool {
		return func(m *nostr.RelayMessage, at time.Time) bool { return subs[k].handle(r, k, d, m, at) }
	})
	if !ok {
		stop()
		return r.finish(), nil
	}
	for k, c := range conns {
		if err := c.Send(subscribeFrame(subs[k].id, filter)); err != nil {
			r.res.Fail("send REQ: %v", err)
			stop()
			return r.finish(), nil
		}
	}
	for _, s := range subs {
		select {
		case <-s.ended:
			subscribed.Add(1)
		case <-r.ctx.Done():
		}
	}
	stop()
	if r.timedOut("waiting for the subscriptions' EOSE") {
		r.checkConns()
		return r.finish(), nil
	}
	var refused int64
	var stored int64
	for _, s := range subs {
		if s.gone.Load() {
			refused++
		}
		stored += s.stored.Load()
	}
	if refused > 0 {
		r.res.Fail("%d of %d subscriptions were refused with CLOSED before EOSE", refused, o.Subs)
	}
	if stored > 0 {
		r.res.Note("%d stored events arrived before EOSE (limit 0 asks for none); not counted as deliveries", stored)
	}

	pcs, ok := r.openPublishers(o.Pubs, o.Window, tr, nil)
	if !ok {
		r.checkConns()
		return r.finish(), nil
	}
	stop = r.phase("delivering", int64(o.Events)*int64(o.Subs), d.total.Load)
	r.startMeasure()
	tr.start()
	d.prog.Store(time.Now().UnixNano())
	r.publishPaced(pcs, tr, o.Rate)
	var accepted int64
	for i := 0; i < set.Len(); i++ {
		if tr.acceptedNew(i) {
			accepted++
		}
	}
	// Wait until every live subscriber has every accepted event, the
	// deadline passes, or deliveries stall.
	complete := func() bool {
		for k, s := range subs {
			if s.gone.Load() || conns[k].Lost() {
				continue
			}
			if s.received.Load() < accepted {
				return false
			}
		}
		return true
	}
	stalled := false
	waitUntil(r.ctx, func() bool {
		if complete() {
			return true
		}
		if time.Since(time.Unix(0, d.prog.Load())) > stallTimeout {
			stalled = true
			return true
		}
		return false
	})
	if !complete() {
		if !r.timedOut("waiting for deliveries") && stalled {
			r.res.Note("no delivery arrived for %v: stopped waiting", stallTimeout)
		}
	}
	// A short settle catches late duplicates.
	time.Sleep(200 * time.Millisecond)
	end := tr.end()
	if last := tr.base.Add(time.Duration(d.last.Load())); last.After(end) {
		end = last
	}
	stop()
	c := tr.snapshot()
	r.stopMeasure(end, c.Accepted, 0)
	r.checkConns()
	res := r.finish()
	for _, c := range conns {
		<-c.Done() // the socket is closed: the reader ends, and seen is safe to read
	}
	var dl Deliveries
	var subsMissing, closedSubs int64
	for _, s := range subs {
		var got, miss int64
		for i := 0; i < set.Len(); i++ {
			bit := s.seen[i/64]&(uint64(1)<<(i%64)) != 0
			switch {
			case tr.acceptedNew(i) && bit:
				got++
			case tr.acceptedNew(i):
				miss++
			case bit:
				dl.Unexpected++
			}
		}
		dl.Received += got
		dl.Missing += miss
		dl.Duplicated += s.duplicated.Load()
		dl.Unexpected += s.unexpected.Load()
		if miss > 0 {
			subsMissing++
		}
		if s.gone.Load() {
			closedSubs++
		}
	}
	dl.Expected = int64(o.Subs) * accepted
	perUnit(res.Relay, c.Accepted, dl.Received)
	perUnit(res.Client, c.Accepted, dl.Received)
	if w := res.Wire; w != nil {
		w.PerDelivery = 0
		if dl.Received > 0 {
			w.PerDelivery = float64(w.BytesIn) / float64(dl.Received)
		}
	}
	res.OK = c
	res.Deliveries = &dl
	res.Rates = map[string]float64{"accepted_events": r.rate(c.Accepted, end), "deliveries": r.rate(dl.Received, end)}
	res.Latency = map[string]Summary{"ok": tr.hist.Snapshot().Summary(), "delivery": d.hist().Summary(),
		"delivery_from_ok": d.histFromOK().Summary()}
	if n := d.early.Load(); n > 0 {
		r.res.Note("%d deliveries were handled before their event's OK (counted as 0 in delivery_from_ok)", n)
	}
	r.judgeOK(c, false)
	if dl.Missing > 0 {
		res.Failures = append([]string{
			strconv.FormatInt(dl.Missing, 10) + " of " + strconv.FormatInt(dl.Expected, 10) + " deliveries missing (" +
				strconv.FormatInt(subsMissing, 10) + " of " + strconv.Itoa(o.Subs) + " subscribers short, " +
				strconv.FormatInt(closedSubs, 10) + " subscriptions CLOSED by the relay)"}, res.Failures...)
	} else if closedSubs > 0 {
		r.res.Fail("%d subscriptions CLOSED by the relay", closedSubs)
	}
	if dl.Duplicated > 0 {
		r.res.Fail("%d duplicate deliveries", dl.Duplicated)
	}
	return res, nil
}

// perUnit fills a Usage's per-event and per-delivery CPU figures.
func perUnit(u *Usage, accepted, deliveries int64) {
	if u == nil {
		return
	}
	u.CPUMicrosPerEvent, u.CPUMicrosPerDelivery = 0, 0
	if accepted > 0 {
		u.CPUMicrosPerEvent = u.CPUSeconds * 1e6 / float64(accepted)
	}
	if deliveries > 0 {
		u.CPUMicrosPerDelivery = u.CPUSeconds * 1e6 / float64(deliveries)
	}
}
