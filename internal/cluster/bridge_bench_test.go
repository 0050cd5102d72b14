package cluster

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// benchEvent returns the raw JSON of a distinct event per i (the bridge
// does not verify signatures, so the id need not match).
func benchEvent(tmpl *nostr.Event, i int) []byte {
	var id nostr.ID
	binary.BigEndian.PutUint64(id[:], uint64(i)+1)
	raw := []byte(`{"id":"` + hex.EncodeToString(id[:]) + `","pubkey":"` + tmpl.PubKey.Hex() +
		`","created_at":` + strconv.FormatInt(tmpl.CreatedAt, 10) + `,"kind":1,"tags":[],"content":` +
		strconv.Quote(tmpl.Content) + `,"sig":"` + tmpl.Sig.Hex() + `"}`)
	return raw
}

// BenchmarkReceive: one bus message from another node, from the NATS
// callback to the relay's Publish (a no-op here): decode, sequence check,
// parse, deletion check, window.
func BenchmarkReceive(b *testing.B) {
	br, err := New(Options{URL: "nats://127.0.0.1:1", Node: "bench", Feed: newFeedStore(nil), Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	br.deliver = func(*nostr.Event, uint64) {}
	br.connected = true
	tmpl := relaytest.NewKey("bench").Note("a note of ordinary length, about as long as most notes are on relays today")
	origin := originHeader("other", 7, time.Now().Add(-time.Hour).UnixNano())
	const n = 1 << 16
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		msgs[i] = &nats.Msg{Data: appendEnvelope(nil, envEvent, origin, uint64(i)+1, time.Now().UnixNano(), uint64(i)+1, benchEvent(tmpl, i))}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n { // a new origin, so the ids and sequence start afresh
			b.StopTimer()
			br = &Bridge{opts: br.opts, log: br.log, origin: br.origin, win: newWindow(br.opts.DedupMax, int64(br.opts.DedupWindow)),
				rm: br.rm, origins: map[string]*originState{}, deliver: br.deliver, connected: true}
			i = 0
			b.StartTimer()
		}
		br.onMsg(msgs[i])
		i++
	}
	if br.st.received.Load() == 0 || br.st.duplicates.Load() != 0 || br.st.gaps.Load() != 0 {
		b.Fatalf("received %d, %d duplicates, %d gaps", br.st.received.Load(), br.st.duplicates.Load(), br.st.gaps.Load())
	}
}

// BenchmarkPublish: Bridge.Publish on the relay's dispatcher goroutine
// (window, queue), with the publisher draining the queue into an
// envelope as it would before handing it to NATS.
func BenchmarkPublish(b *testing.B) {
	br, err := New(Options{URL: "nats://127.0.0.1:1", Node: "bench", Feed: newFeedStore(nil), Logger: testLogger(b), PublishQueue: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	tmpl := relaytest.NewKey("bench").Note("a note of ordinary length, about as long as most notes are on relays today")
	const n = 1 << 16
	evs := make([]*nostr.Event, n)
	for i := range evs {
		ev, err := nostr.ParseEvent(benchEvent(tmpl, i), nil)
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	done := make(chan struct{})
	go func() { // the publisher's share, without the network
		buf := make([]byte, 0, 4096)
		for {
			select {
			case it := <-br.pubq:
				buf = appendEnvelope(buf[:0], envEvent, br.origin, it.seq, time.Now().UnixNano(), it.commit, it.ev.Raw)
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n {
			b.StopTimer()
			br.win = newWindow(br.opts.DedupMax, int64(br.opts.DedupWindow))
			i = 0
			b.StartTimer()
		}
		br.Publish(evs[i], uint64(i)+1)
		i++
	}
}
