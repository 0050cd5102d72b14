package server_test

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// inflateMessage decompresses a permessage-deflate message with
// compress/flate, the reference inflater: the payload, then 00 00 ff ff
// (RFC 7692 7.2.2).
func inflateMessage(t testing.TB, p []byte) []byte {
	t.Helper()
	r := flate.NewReader(io.MultiReader(bytes.NewReader(p), bytes.NewReader([]byte{0, 0, 0xff, 0xff, 1, 0, 0, 0xff, 0xff})))
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("inflate: %v", err)
	}
	return out
}

// readText reads the next data frame of w's, inflated if it is compressed,
// and says whether it was.
func (w *rawWS) readText() ([]byte, bool) {
	w.t.Helper()
	op, p, err := w.readFrame()
	if err != nil || op != 0x1 || w.b0&0x80 == 0 {
		w.t.Fatalf("want a whole text frame: first byte %#x, %q, %v", w.b0, p, err)
	}
	if w.b0&0x40 == 0 {
		return p, false
	}
	return inflateMessage(w.t, p), true
}

// testNotes returns signed kind-1 events of assorted sizes: a short one,
// one with tags, long repetitive content, and content longer than a
// 512-byte window.
func testNotes() []*nostr.Event {
	k := relaytest.NewKey("compression")
	p := relaytest.NewKey("someone else").PK.Hex()
	base := time.Now().Unix() - 100
	var out []*nostr.Event
	for i, c := range []struct {
		content string
		tags    nostr.Tags
	}{
		{"gm", nil},
		{"hello, compressed world", nostr.Tags{{"p", p}, {"t", "nostr"}}},
		{strings.Repeat("the quick brown fox jumps over the lazy dog. ", 60), nil},
		{"ünïcødé ✓ " + strings.Repeat("ab", 300), nil},
		{strings.Repeat("x", 5000), nostr.Tags{{"e", strings.Repeat("0", 64)}}},
	} {
		out = append(out, k.Event(nostr.KindTextNote, c.content, c.tags, base+int64(i)))
	}
	return out
}

// TestCompressionDelivers: with permessage-deflate negotiated, live and
// stored events reach a gorilla client (EnableCompression) and a raw
// client (frames inflated by compress/flate) exactly as an uncompressed
// client gets them; event frames go compressed (RSV1), EOSE and OK do
// not; a client that asked for a 512-byte server window gets events too
// long for it uncompressed.
func TestCompressionDelivers(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	addr := r.Server.Addr().String()
	plain := relaytest.Dial(t, r.URL)
	gz, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Compression: true})
	if err != nil {
		t.Fatal(err)
	}
	if !gz.Compressed() || plain.Compressed() {
		t.Fatalf("negotiated: gorilla with compression %v, plain %v", gz.Compressed(), plain.Compressed())
	}
	raw := dialRawOffer(t, addr, "permessage-deflate; client_max_window_bits")
	raw9 := dialRawOffer(t, addr, "permessage-deflate; server_max_window_bits=9")
	if !strings.HasPrefix(raw.ext, "permessage-deflate") || !strings.Contains(raw9.ext, "server_max_window_bits=9") {
		t.Fatalf("extensions answered: %q and %q", raw.ext, raw9.ext)
	}

	req := `["REQ","live",{"kinds":[1],"limit":0}]`
	for _, c := range []*relaytest.Client{plain, gz} {
		c.SendRaw(req)
		c.UntilEOSE("live")
	}
	for _, w := range []*rawWS{raw, raw9} {
		w.send(rawFrame(0x81, true, []byte(req)))
		if p, z := w.readText(); string(p) != `["EOSE","live"]` || z {
			t.Fatalf("EOSE: %q, compressed %v", p, z)
		}
	}

	notes := testNotes()
	pub := relaytest.Dial(t, r.URL)
	compressed := 0
	check := func(what string, ev *nostr.Event) {
		t.Helper()
		want := plain.ReadRaw()
		if !bytes.Contains(want, ev.Raw) {
			t.Fatalf("%s: plain client got %q", what, want)
		}
		if got := gz.ReadRaw(); !bytes.Equal(got, want) {
			t.Fatalf("%s: gorilla with compression got %q; want %q", what, got, want)
		}
		got, z := raw.readText()
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: raw client got %q; want %q", what, got, want)
		}
		if z {
			compressed++
		}
		got, z9 := raw9.readText()
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: raw client with a 512-byte window got %q; want %q", what, got, want)
		}
		if z9 && len(ev.Raw)+1 > 512 {
			t.Fatalf("%s: an event of %d bytes was compressed for a 512-byte window", what, len(ev.Raw))
		}
	}
	for i, ev := range notes {
		pub.MustPublish(ev)
		check(fmt.Sprintf("live event %d", i), ev)
	}
	if compressed != len(notes) {
		t.Fatalf("%d of %d live events compressed; want all", compressed, len(notes))
	}

	// Stored: the same events, newest first, through the query path.
	compressed = 0
	req = `["REQ","stored",{"kinds":[1]}]`
	plain.SendRaw(req)
	gz.SendRaw(req)
	raw.send(rawFrame(0x81, true, []byte(req)))
	raw9.send(rawFrame(0x81, true, []byte(req)))
	for i := len(notes) - 1; i >= 0; i-- {
		check(fmt.Sprintf("stored event %d", i), notes[i])
	}
	if compressed != len(notes) {
		t.Fatalf("%d of %d stored events compressed; want all", compressed, len(notes))
	}
	st := r.Stats()
	if st.FramesCompressed == 0 || st.BytesCompressionSaved <= 0 || st.BytesCompressed <= 0 {
		t.Fatalf("stats: %d frames compressed, %d bytes, %d saved", st.FramesCompressed, st.BytesCompressed, st.BytesCompressionSaved)
	}
	// The stored answers took the bodies compressed for the live fan-out
	// from the cache: each event was compressed once in all.
	if st.BodyCacheHits < int64(len(notes)) {
		t.Fatalf("%d compressed bodies taken from the cache; want %d or more", st.BodyCacheHits, len(notes))
	}
}

// TestCompressionOff: with server.compression = false every offer is
// declined and events go plain.
func TestCompressionOff(t *testing.T) {
	off := false
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{Compression: &off}})
	gz, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Compression: true})
	if err != nil {
		t.Fatal(err)
	}
	if gz.Compressed() {
		t.Fatal("compression negotiated with server.compression = false")
	}
	w := dialRawOffer(t, r.Server.Addr().String(), "permessage-deflate")
	if w.ext != "" {
		t.Fatalf("extensions answered: %q", w.ext)
	}
	w.send(rawFrame(0x81, true, []byte(`["REQ","s",{"kinds":[1]}]`)))
	if p, _ := w.readText(); string(p) != `["EOSE","s"]` {
		t.Fatalf("got %q", p)
	}
	ev := testNotes()[2]
	relaytest.Dial(t, r.URL).MustPublish(ev)
	if p, z := w.readText(); z || !bytes.Contains(p, ev.Raw) {
		t.Fatalf("event: compressed %v, %q", z, p)
	}
	if r.Stats().FramesCompressed != 0 {
		t.Fatal("frames compressed with compression off")
	}
}

// deflateMessage compresses p as a permessage-deflate message.
func deflateMessage(p []byte) []byte {
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	_, _ = fw.Write(p)
	_ = fw.Flush()
	return bytes.TrimSuffix(buf.Bytes(), []byte{0, 0, 0xff, 0xff})
}

// TestCompressedMessageAtTheLimit: a compressed message that inflates to
// exactly max_message_bytes is handled; one that inflates to a byte more
// is answered with Close 1009 and counted.
func TestCompressedMessageAtTheLimit(t *testing.T) {
	const limit = 4096
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxMessageBytes: limit}})
	addr := r.Server.Addr().String()
	req := []byte(`["REQ","s",{"limit":1}]`)
	full := append(append([]byte{}, req...), bytes.Repeat([]byte(" "), limit-len(req))...)

	w := dialRawOffer(t, addr, "permessage-deflate")
	w.send(rawFrame(0xc1, true, deflateMessage(full)))
	if p, _ := w.readText(); string(p) != `["EOSE","s"]` {
		t.Fatalf("message inflating to the limit: got %q; want EOSE", p)
	}
	before := r.Stats().LimitTrips["max_message_bytes"]
	over := dialRawOffer(t, addr, "permessage-deflate")
	over.send(rawFrame(0xc1, true, deflateMessage(append(full, ' '))))
	over.expectClose(1009)
	waitOversized(t, r, before+1)
	// The first connection is undisturbed.
	w.send(rawFrame(0x81, true, []byte(`["REQ","t",{"limit":1}]`)))
	if p, _ := w.readText(); string(p) != `["EOSE","t"]` {
		t.Fatalf("after the other's 1009: got %q", p)
	}
}

// TestCompressionBomb: a 100 MB message of spaces compressed to under a
// 256 KiB message limit is answered with Close 1009 having allocated
// about the limit, not the message: the relay's process allocates less
// than 8 MiB in all while it is handled (it would be 100 MB and more if
// the message were inflated).
func TestCompressionBomb(t *testing.T) {
	const limit = 256 << 10
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxMessageBytes: limit}})
	bomb := deflateMessage(bytes.Repeat([]byte(" "), 100<<20))
	if len(bomb) > limit {
		t.Fatalf("the bomb is %d bytes compressed, over the %d-byte frame limit", len(bomb), limit)
	}
	w := dialRawOffer(t, r.Server.Addr().String(), "permessage-deflate")
	frame := rawFrame(0xc1, true, bomb)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	w.send(frame)
	w.expectClose(1009)
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("bomb of %d bytes (100 MiB inflated): %d bytes allocated while handled, heap in use %d -> %d", len(bomb), alloc, m0.HeapInuse, m1.HeapInuse)
	if alloc > 8<<20 {
		t.Fatalf("%d bytes allocated for a message capped at %d", alloc, limit)
	}
	waitOversized(t, r, 1)
}

// waitOversized waits (bounded) until the relay has counted want
// max_message_bytes trips, then checks it counted no more. nbio sends
// the 1009 close before it calls the relay's close handler, which counts
// the trip, so the client can see the close first.
func waitOversized(t *testing.T, r *relaytest.Relay, want int64) {
	t.Helper()
	trips := func() int64 { return r.Stats().LimitTrips["max_message_bytes"] }
	waitFor(t, fmt.Sprintf("%d max_message_bytes trips", want), func() bool { return trips() >= want })
	if got := trips(); got != want {
		t.Fatalf("max_message_bytes trips %d; want %d", got, want)
	}
}
