package server_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestProtocolErrorsClose: a client that breaks RFC 6455 gets a Close
// frame with the right code before the relay closes the TCP connection:
// 1002 (protocol error) for a frame the protocol forbids, 1009 only for
// a message over the size limit. Each case is a fresh connection and raw
// bytes.
func TestProtocolErrorsClose(t *testing.T) {
	const limit = 4096
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxMessageBytes: limit}})
	addr := r.Server.Addr().String()
	text := []byte(`["REQ","s",{"limit":1}]`)
	f := func(name string, code int, frames ...[]byte) {
		t.Helper()
		ws := dialRaw(t, addr)
		for _, fr := range frames {
			ws.send(fr)
		}
		t.Run(name, func(t *testing.T) {
			ws.t = t
			ws.expectClose(code)
		})
	}
	f("unmasked text", 1002, rawFrame(0x81, false, text))
	f("unmasked close", 1002, rawFrame(0x88, false, []byte{0x03, 0xe8}))
	f("RSV1 without an extension", 1002, rawFrame(0xc1, true, text))
	f("RSV2", 1002, rawFrame(0xa1, true, text))
	f("RSV3", 1002, rawFrame(0x91, true, text))
	f("opcode 0x3", 1002, rawFrame(0x83, true, text))
	f("opcode 0x7", 1002, rawFrame(0x87, true, text))
	f("opcode 0xb", 1002, rawFrame(0x8b, true, nil))
	f("opcode 0xf", 1002, rawFrame(0x8f, true, nil))
	f("continuation with no start", 1002, rawFrame(0x80, true, text))
	f("unfinished continuation with no start", 1002, rawFrame(0x00, true, text))
	f("text inside a fragmented message", 1002, rawFrame(0x01, true, text[:5]), rawFrame(0x81, true, text[5:]))
	f("fragmented ping", 1002, rawFrame(0x09, true, []byte("x")))
	f("ping of 126 bytes", 1002, rawFrame(0x89, true, bytes.Repeat([]byte("p"), 126)))
	f("close of 126 bytes", 1002, rawFrame(0x88, true, append([]byte{0x03, 0xe8}, bytes.Repeat([]byte("c"), 124)...)))
	f("close with one byte", 1002, rawFrame(0x88, true, []byte{0x03}))
	f("close with code 999", 1002, rawFrame(0x88, true, []byte{0x03, 0xe7}))
	f("length with the top bit set", 1002, rawHeader(0x82, true, 1<<63))
	f("length of 2^40", 1009, rawHeader(0x82, true, 1<<40))
	f("length of 2^40, no mask", 1002, rawHeader(0x82, false, 1<<40))
	// With bytes behind the header, unread when the relay closes (the
	// kernel then resets the connection): the Close frame still comes
	// first.
	body := make([]byte, 32<<10)
	f("length of 2^40, a body following", 1009, append(rawHeader(0x82, true, 1<<40), body...))
	f("opcode 0x3, a body following", 1002, append(rawHeader(0x83, true, 1<<20), body...))
	f("message one byte over the limit", 1009, rawFrame(0x81, true, bytes.Repeat([]byte(" "), limit+1)))
	f("fragments one byte over the limit", 1009,
		rawFrame(0x01, true, bytes.Repeat([]byte(" "), limit/2)),
		rawFrame(0x80, true, bytes.Repeat([]byte(" "), limit/2+1)))
}

// TestProtocolAtTheLimits: what is just inside each bound is served: a
// ping of 125 bytes is answered with a pong of the same bytes, a message
// of exactly the size limit (in one frame, and in fragments with a ping
// between them) is handled, and the connection stays open.
func TestProtocolAtTheLimits(t *testing.T) {
	const limit = 4096
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxMessageBytes: limit}})
	ws := dialRaw(t, r.Server.Addr().String())

	ping := bytes.Repeat([]byte("p"), 125)
	ws.send(rawFrame(0x89, true, ping))
	if op, payload, err := ws.readFrame(); err != nil || op != 0xa || !bytes.Equal(payload, ping) {
		t.Fatalf("ping of 125 bytes: opcode %#x, %d bytes, %v; want its pong", op, len(payload), err)
	}

	req := []byte(`["REQ","s",{"limit":1}]`)
	full := append(append([]byte{}, req...), bytes.Repeat([]byte(" "), limit-len(req))...)
	expectEOSE := func(what string) {
		t.Helper()
		for {
			op, payload, err := ws.readFrame()
			if err != nil || op != 0x1 {
				t.Fatalf("%s: opcode %#x %q, %v; want text frames up to EOSE", what, op, payload, err)
			}
			if bytes.HasPrefix(payload, []byte(`["EOSE","s"]`)) {
				return
			}
		}
	}
	ws.send(rawFrame(0x81, true, full))
	expectEOSE("message of exactly the limit")

	ws.send(rawFrame(0x01, true, full[:limit/2]))
	ws.send(rawFrame(0x89, true, []byte("between")))
	ws.send(rawFrame(0x80, true, full[limit/2:]))
	if op, payload, err := ws.readFrame(); err != nil || op != 0xa || string(payload) != "between" {
		t.Fatalf("ping between fragments: opcode %#x %q, %v; want its pong", op, payload, err)
	}
	expectEOSE("fragmented message of exactly the limit")

	var code [2]byte
	binary.BigEndian.PutUint16(code[:], 1000)
	ws.send(rawFrame(0x88, true, code[:]))
	ws.expectClose(1000)
}
