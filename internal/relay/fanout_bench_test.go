package relay

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/deflate"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// sinkTransport is a Transport whose socket takes everything at once: it
// reports each write as written, as the server's transport does when the
// kernel takes the bytes.
type sinkTransport struct {
	s     atomic.Pointer[Session]
	bytes atomic.Int64
}

func (t *sinkTransport) Write(b []byte) error {
	t.bytes.Add(int64(len(b)))
	t.s.Load().Written(len(b))
	return nil
}

func (t *sinkTransport) Close(int, string) {}

// fanoutWorld is a relay over the model store with subs sessions, each
// with one live subscription to kind 1 from the same authors (the bar-2
// shape), and events by those authors.
type fanoutWorld struct {
	r      *Relay
	sinks  []*sinkTransport
	events []*nostr.Event
}

func newFanoutWorld(tb testing.TB, subs, authors int) *fanoutWorld {
	return newFanoutWorldZ(tb, subs, authors, false)
}

// newFanoutWorldZ is newFanoutWorld with every session having negotiated
// permessage-deflate when compress is set.
func newFanoutWorldZ(tb testing.TB, subs, authors int, compress bool) *fanoutWorld {
	tb.Helper()
	r, err := New(Config{}, Options{Store: storetest.NewModel()})
	if err != nil {
		tb.Fatal(err)
	}
	if compress {
		codec, err := deflate.New(1)
		if err != nil {
			tb.Fatal(err)
		}
		r.SetCompression(Compression{Codec: codec, MinBytes: 256})
	}
	tb.Cleanup(func() { r.Shutdown(tb.Context()) })
	w := &fanoutWorld{r: r}
	var hexes []string
	for i := range authors {
		sk := nostr.SecretKeyFromSeed(fmt.Appendf(nil, "fanout-author-%d", i))
		ev := &nostr.Event{Kind: 1, CreatedAt: 1700000000 + int64(i), Content: strings.Repeat("fan-out benchmark text ", 10),
			Tags: nostr.Tags{{"t", "bench"}, {"p", "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"}}}
		nostr.SignEvent(ev, sk)
		ev.Raw = nostr.Serialize(ev)
		w.events = append(w.events, ev)
		hexes = append(hexes, `"`+ev.PubKey.Hex()+`"`)
	}
	req := []byte(`["REQ","feed",{"kinds":[1],"authors":[` + strings.Join(hexes, ",") + `],"limit":0}]`)
	var sessions []*Session
	for range subs {
		t := &sinkTransport{}
		s := r.NewSession(t, "192.0.2.1")
		t.s.Store(s)
		if compress {
			s.EnableCompression(15)
		}
		s.Start()
		s.HandleMessage(req, false)
		w.sinks = append(w.sinks, t)
		sessions = append(sessions, s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range sessions {
		for !subLiveIn(s) {
			if time.Now().After(deadline) {
				tb.Fatal("subscriptions did not go live")
			}
			time.Sleep(time.Millisecond)
		}
	}
	return w
}

// subLiveIn reports whether s's subscription has passed EOSE.
func subLiveIn(s *Session) bool {
	s.mu.Lock()
	sb := s.subs.get("feed")
	s.mu.Unlock()
	if sb == nil {
		return false
	}
	s.out.mu.Lock()
	defer s.out.mu.Unlock()
	return sb.state == subLive
}

// drained waits until every session's out-queue has been written.
func (w *fanoutWorld) drained(tb testing.TB, want int64) {
	deadline := time.Now().Add(30 * time.Second)
	for _, t := range w.sinks {
		for t.bytes.Load() < want {
			if time.Now().After(deadline) {
				tb.Fatalf("out-queues not drained: %d of %d bytes", t.bytes.Load(), want)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// idle waits until every session's out-queue is empty and its transport
// has written everything (for compressed frames, whose sizes the caller
// does not know).
func (w *fanoutWorld) idle(tb testing.TB) {
	deadline := time.Now().Add(30 * time.Second)
	for _, t := range w.sinks {
		o := &t.s.Load().out
		for {
			o.mu.Lock()
			busy := o.writing || o.pending()
			o.mu.Unlock()
			if !busy && o.inTransp.Load() == 0 && !o.scheduled.Load() {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatal("out-queues not drained")
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// BenchmarkFanoutDeflate is BenchmarkFanout with every subscriber having
// negotiated permessage-deflate: the event's body is compressed once per
// event and each subscriber's frame is its stored prefix block plus that
// body. wire-ratio is the bytes written over the plain frames' bytes.
func BenchmarkFanoutDeflate(b *testing.B) {
	for _, subs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			w := newFanoutWorldZ(b, subs, 100, true)
			d := w.r.dispatch
			base := w.sinks[0].bytes.Load()
			b.ReportAllocs()
			b.ResetTimer()
			var plain int64
			for i := range b.N {
				ev := w.events[i%len(w.events)]
				d.fanout(ev, 1<<40+uint64(i))
				if i%8 == 7 || i == b.N-1 {
					d.flushTouched()
				}
				n := len(`["EVENT","feed",]`) + len(ev.Raw)
				plain += int64(n + wsHeaderLen(n))
				if i%1024 == 1023 {
					w.idle(b)
				}
			}
			w.idle(b)
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*int64(subs)), "ns/delivery")
			b.ReportMetric(float64(w.sinks[0].bytes.Load()-base)/float64(plain), "wire-ratio")
			st := w.r.Stats()
			if st.BuffersDropped != 0 {
				b.Fatalf("%d subscriptions dropped as slow consumers", st.BuffersDropped)
			}
			if st.FramesCompressed != int64(b.N)*int64(subs) {
				b.Fatalf("%d frames compressed; want %d", st.FramesCompressed, int64(b.N)*int64(subs))
			}
		})
	}
}

// BenchmarkFanout is the in-process gate for bar 2's path: one event
// matched against the subscription index and appended to every matching
// out-queue, whose flushers hand the frames to the transport. One op is one
// event; ns/delivery and allocs/op cover the flushers' work as well.
func BenchmarkFanout(b *testing.B) {
	for _, subs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			w := newFanoutWorld(b, subs, 100)
			d := w.r.dispatch
			base := w.sinks[0].bytes.Load()
			b.ReportAllocs()
			b.ResetTimer()
			var sent int64
			for i := range b.N {
				// As the dispatcher goroutine does (it is idle here: nothing
				// is published), with batches of 8 events, about what one
				// commit of the writer brings under bar 2's load.
				ev := w.events[i%len(w.events)]
				// A commit position above every subscription's snapshot,
				// as for a newly committed event.
				d.fanout(ev, 1<<40+uint64(i))
				if i%8 == 7 || i == b.N-1 {
					d.flushTouched()
				}
				sent += int64(len(`["EVENT","feed",]`) + len(ev.Raw))
				if i%1024 == 1023 {
					// Let the flushers catch up now and then, so a busy
					// machine measures a slower fan-out instead of
					// overflowing the out-queues (which fails the run).
					w.drained(b, base+sent)
				}
			}
			// Every subscriber has every frame (headers add 2-4 bytes).
			w.drained(b, base+sent)
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*int64(subs)), "ns/delivery")
			if st := w.r.Stats(); st.BuffersDropped != 0 {
				b.Fatalf("%d subscriptions dropped as slow consumers", st.BuffersDropped)
			}
		})
	}
}

// BenchmarkIndexCandidates: the live index's lookup for one event among
// 10,000 subscriptions listed by authors, tags, kinds and ids, visiting
// the candidates (about 1% of them) without matching.
func BenchmarkIndexCandidates(b *testing.B) {
	ix := newIndex()
	var pks []nostr.PubKey
	for i := range 1000 {
		var pk nostr.PubKey
		pk[0], pk[1], pk[31] = byte(i), byte(i>>8), 7
		pks = append(pks, pk)
	}
	for i := range 10000 {
		var f nostr.Filter
		switch i % 4 {
		case 0, 1: // a follow list of 50
			for k := range 50 {
				f.Authors = append(f.Authors, pks[(i*7+k*13)%len(pks)])
			}
			f.Present = nostr.PresentAuthors
		case 2: // mentions of one pubkey
			f.Tags = []nostr.TagFilter{{Name: 'p', Values: []string{pks[i%len(pks)].Hex()}}}
		case 3: // replies to one event
			var id nostr.ID
			id[0], id[1] = byte(i), byte(i>>8)
			f.Tags = []nostr.TagFilter{{Name: 'e', Values: []string{id.Hex()}}}
		}
		ix.add(&sub{filters: []nostr.Filter{f}})
	}
	ix.add(&sub{filters: []nostr.Filter{{Kinds: []int{1}, Present: nostr.PresentKinds}}})
	ev := &nostr.Event{Kind: 1, PubKey: pks[3], Tags: nostr.Tags{{"p", pks[5].Hex()}, {"t", "nostr"}}}
	visited := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		visited = 0
		ix.candidates(ev, func(*sub) { visited++ })
	}
	b.ReportMetric(float64(visited), "candidates")
}
