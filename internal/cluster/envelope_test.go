package cluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	raw := relaytest.NewKey("env").Note("hello").Raw
	f := func(typ byte, name string, seq uint64, commit uint64, payload []byte) {
		t.Helper()
		origin := originHeader(name, 0x0102030405060708, 1_700_000_000_123_456_789)
		msg := appendEnvelope([]byte("junk"), typ, origin, seq, 1_700_000_001_000_000_000, commit, payload)[4:]
		var e envelope
		if err := decodeEnvelope(msg, &e); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if e.typ != typ || string(e.name) != name || e.boot != 0x0102030405060708 || e.bootTime != 1_700_000_000_123_456_789 ||
			e.seq != seq || e.sent != 1_700_000_001_000_000_000 || e.commit != commit || !bytes.Equal(e.payload, payload) ||
			!bytes.Equal(e.origin, origin) {
			t.Fatalf("round trip changed the envelope: %+v", e)
		}
	}
	f(envEvent, "node-1", 1, 77, raw)
	f(envEvent, "n", 1<<63, 0, raw)
	f(envHeartbeat, "node-1", 0, 0, nil)
	f(envBye, "node-1", 12, 0, nil)
	f(envEvent, strings.Repeat("x", MaxNodeName), 5, 9, raw) // at the name limit
}

func TestEnvelopeRejects(t *testing.T) {
	origin := originHeader("node", 1, 2)
	good := appendEnvelope(nil, envEvent, origin, 1, 3, 4, []byte(`{}`))
	f := func(msg []byte, want error) {
		t.Helper()
		var e envelope
		if err := decodeEnvelope(msg, &e); !errors.Is(err, want) {
			t.Fatalf("decode %x: %v, want %v", msg, err, want)
		}
	}
	edit := func(fn func(b []byte) []byte) []byte { return fn(bytes.Clone(good)) }
	f(nil, ErrEnvelope)
	f(good[:3], ErrEnvelope)
	f(edit(func(b []byte) []byte { b[0] = 2; return b }), ErrVersion)
	f(edit(func(b []byte) []byte { b[1] = 9; return b }), ErrEnvelope)
	f(good[:len(good)-3], ErrEnvelope)                                           // shorter than its header
	f(edit(func(b []byte) []byte { b[4] = 0; return b }), ErrEnvelope)           // no name
	f(edit(func(b []byte) []byte { b[4] = 200; return b }), ErrEnvelope)         // name past the header
	f(edit(func(b []byte) []byte { b[2], b[3] = 0, 10; return b }), ErrEnvelope) // header too short
	f(appendEnvelope(nil, envEvent, origin, 1, 3, 4, nil), ErrEnvelope)          // event without payload
	f(appendEnvelope(nil, envEvent, origin, 0, 3, 4, []byte("{}")), ErrEnvelope)
	f(appendEnvelope(nil, envHeartbeat, origin, 1, 3, 0, []byte("{}")), ErrEnvelope)
	// Past the name limit.
	long := appendEnvelope(nil, envEvent, originHeader(strings.Repeat("x", MaxNodeName+1), 1, 2), 1, 3, 4, []byte("{}"))
	f(long, ErrEnvelope)
	// A later version's extra header fields are skipped.
	ext := appendEnvelope(nil, envEvent, origin, 1, 3, 4, nil)
	h := len(ext) + 5
	ext[2], ext[3] = byte(h>>8), byte(h)
	ext = append(ext, 1, 2, 3, 4, 5, '{', '}')
	var e envelope
	if err := decodeEnvelope(ext, &e); err != nil || string(e.payload) != "{}" || e.commit != 4 {
		t.Fatalf("extended header: %v, payload %q", err, e.payload)
	}
}

func FuzzEnvelope(f *testing.F) {
	raw := relaytest.NewKey("fuzz").Note("x").Raw
	origin := originHeader("node", 1, 2)
	f.Add(appendEnvelope(nil, envEvent, origin, 1, 3, 4, raw))
	f.Add(appendEnvelope(nil, envHeartbeat, origin, 9, 3, 0, nil))
	f.Add(appendEnvelope(nil, envBye, origin, 9, 3, 0, nil))
	f.Add([]byte{1, 1, 0, 5, 0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var e envelope
		if err := decodeEnvelope(msg, &e); err != nil {
			if !errors.Is(err, ErrEnvelope) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		// What decodes re-encodes to a message that decodes the same
		// (extra header fields of later versions aside).
		name := string(e.name)
		again := appendEnvelope(nil, e.typ, originHeader(name, e.boot, e.bootTime), e.seq, e.sent, e.commit, e.payload)
		var e2 envelope
		if err := decodeEnvelope(again, &e2); err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if e2.typ != e.typ || string(e2.name) != name || e2.seq != e.seq || e2.sent != e.sent ||
			e2.commit != e.commit || !bytes.Equal(e2.payload, e.payload) || !bytes.Equal(e2.origin, e.origin) {
			t.Fatalf("re-encoding changed the envelope")
		}
		if len(e.name) == 0 || len(e.name) > MaxNodeName {
			t.Fatalf("accepted a name of %d bytes", len(e.name))
		}
	})
}
