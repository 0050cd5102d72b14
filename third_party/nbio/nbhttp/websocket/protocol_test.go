package websocket

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp"
)

// testMaskKey is the key clientFrame masks with.
var testMaskKey = [4]byte{0x37, 0xfa, 0x21, 0x3d}

// frameHeader builds a frame's header announcing length bytes, with the
// mask key when mask is set.
func frameHeader(b0 byte, mask bool, length uint64) []byte {
	f := []byte{b0, 0}
	switch {
	case length <= 125:
		f[1] = byte(length)
	case length <= 0xffff:
		f[1] = 126
		f = binary.BigEndian.AppendUint16(f, uint16(length))
	default:
		f[1] = 127
		f = binary.BigEndian.AppendUint64(f, length)
	}
	if mask {
		f[1] |= 0x80
		f = append(f, testMaskKey[:]...)
	}
	return f
}

// clientFrame builds a frame with first byte b0 and payload, masked when
// mask is set.
func clientFrame(b0 byte, mask bool, payload []byte) []byte {
	f := frameHeader(b0, mask, uint64(len(payload)))
	for i, b := range payload {
		if mask {
			b ^= testMaskKey[i%4]
		}
		f = append(f, b)
	}
	return f
}

// readServerFrame reads one frame the server sent.
func readServerFrame(c net.Conn, r *bufio.Reader) (byte, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	if n == 126 {
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	} else if n == 127 {
		return 0, nil, errors.New("server frame over 64 KiB")
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return h[0], p, err
}

// startEcho starts an engine whose upgrader echoes messages and pings,
// with a message limit of limit bytes; compress enables permessage-deflate.
func startEcho(t *testing.T, limit int, compress bool) string {
	t.Helper()
	u := NewUpgrader()
	u.KeepaliveTime = 0
	u.MessageLengthLimit = limit
	u.EnableCompression(compress)
	u.OnMessage(func(c *Conn, mt MessageType, data []byte) { _ = c.WriteMessage(mt, data) })
	e := nbhttp.NewEngine(nbhttp.Config{
		Network: "tcp",
		Addrs:   []string{"127.0.0.1:0"},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = u.Upgrade(w, r, nil)
		}),
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e.Addrs[0]
}

// expectCloseFrame reads the server's next frame, a Close with code, and
// then the end of the connection.
func expectCloseFrame(t *testing.T, c net.Conn, r *bufio.Reader, code int) {
	t.Helper()
	b0, p, err := readServerFrame(c, r)
	if err != nil {
		t.Fatalf("want a Close frame %d: %v", code, err)
	}
	if b0 != 0x88 || len(p) < 2 {
		t.Fatalf("want a Close frame %d; got %#x %q", code, b0, p)
	}
	if got := int(binary.BigEndian.Uint16(p)); got != code {
		t.Fatalf("Close frame %d %q; want %d", got, p[2:], code)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("after the Close frame: read %d, %v; want the connection closed", n, err)
	}
}

// TestProtocolErrorsAnsweredWithClose: a frame RFC 6455 forbids is
// answered with a Close frame 1002 before the connection is closed, a
// message over the limit with 1009. Unmasked frames were accepted; RSV
// bits, reserved opcodes, a continuation with nothing to continue and a
// negative 64-bit length closed the connection with no Close frame (or
// waited for more); a control frame over 125 bytes got 1009.
func TestProtocolErrorsAnsweredWithClose(t *testing.T) {
	const limit = 1000
	addr := startEcho(t, limit, false)
	text := []byte("hello")
	f := func(name string, code int, frames ...[]byte) {
		t.Helper()
		c, r := dialWebSocket(t, addr)
		defer c.Close()
		for _, fr := range frames {
			if _, err := c.Write(fr); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(name, func(t *testing.T) { expectCloseFrame(t, c, r, code) })
	}
	f("unmasked", 1002, clientFrame(0x81, false, text))
	f("RSV1 not negotiated", 1002, clientFrame(0xc1, true, text))
	f("RSV2", 1002, clientFrame(0xa1, true, text))
	f("RSV3", 1002, clientFrame(0x91, true, text))
	f("opcode 0x3", 1002, clientFrame(0x83, true, text))
	f("opcode 0xb", 1002, clientFrame(0x8b, true, nil))
	f("continuation with no start", 1002, clientFrame(0x80, true, text))
	f("unfinished continuation with no start", 1002, clientFrame(0x00, true, text))
	f("text inside a fragmented message", 1002, clientFrame(0x01, true, text), clientFrame(0x81, true, text))
	f("fragmented ping", 1002, clientFrame(0x09, true, text))
	f("ping of 126 bytes", 1002, clientFrame(0x89, true, bytes.Repeat([]byte("p"), 126)))
	f("ping announcing 2^16 bytes", 1002, frameHeader(0x89, true, 1<<16))
	f("length with the top bit set", 1002, frameHeader(0x82, true, 1<<63))
	f("length of 2^40", 1009, frameHeader(0x82, true, 1<<40))
	f("length of 2^63-1 after a fragment", 1009, clientFrame(0x02, true, text), frameHeader(0x80, true, 1<<63-1))
	f("message one byte over the limit", 1009, clientFrame(0x82, true, make([]byte, limit+1)))
	f("fragments one byte over the limit", 1009, clientFrame(0x02, true, make([]byte, limit/2)), clientFrame(0x80, true, make([]byte, limit/2+1)))
}

// TestProtocolLimitsServed: at each bound the frame is served: a ping of
// 125 bytes is answered, a message of exactly the limit is echoed, in
// one frame and in fragments with a ping between them.
func TestProtocolLimitsServed(t *testing.T) {
	const limit = 1000
	c, r := dialWebSocket(t, startEcho(t, limit, false))
	defer c.Close()
	expect := func(what string, b0 byte, payload []byte) {
		t.Helper()
		got0, got, err := readServerFrame(c, r)
		if err != nil || got0 != b0 || !bytes.Equal(got, payload) {
			t.Fatalf("%s: %#x (%d bytes), %v; want %#x (%d bytes)", what, got0, len(got), err, b0, len(payload))
		}
	}
	ping := bytes.Repeat([]byte("p"), 125)
	_, _ = c.Write(clientFrame(0x89, true, ping))
	expect("ping of 125 bytes", 0x8a, ping)

	msg := bytes.Repeat([]byte("m"), limit)
	_, _ = c.Write(clientFrame(0x82, true, msg))
	expect("message of the limit", 0x82, msg)

	_, _ = c.Write(clientFrame(0x02, true, msg[:limit/2]))
	_, _ = c.Write(clientFrame(0x89, true, []byte("between")))
	_, _ = c.Write(clientFrame(0x80, true, msg[limit/2:]))
	expect("ping between fragments", 0x8a, []byte("between"))
	expect("fragmented message of the limit", 0x82, msg)
}

// TestRSV1OnlyWhereNegotiated: with permessage-deflate enabled on the
// server, a compressed message (RSV1) is served on a connection that
// negotiated it and refused with 1002 on one that did not offer it.
func TestRSV1OnlyWhereNegotiated(t *testing.T) {
	addr := startEcho(t, 1000, true)
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestSpeed)
	_, _ = fw.Write([]byte("hello, deflate"))
	_ = fw.Flush()
	deflated := bytes.TrimSuffix(buf.Bytes(), []byte{0, 0, 0xff, 0xff})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
	_, _ = io.WriteString(c, req)
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	_, _ = c.Write(clientFrame(0xc2, true, deflated))
	b0, p, err := readServerFrame(c, r)
	if err != nil || b0&0x0f != 0x2 {
		t.Fatalf("compressed message where negotiated: %#x %q %v; want its echo", b0, p, err)
	}

	plain, pr := dialWebSocket(t, addr)
	defer plain.Close()
	_, _ = plain.Write(clientFrame(0xc2, true, deflated))
	expectCloseFrame(t, plain, pr, 1002)
}

// TestClientRefusesMaskedFrame: an nbio client answers a masked frame
// from the server (RFC 6455 5.1: a server must not mask) with a Close
// frame 1002, after serving the unmasked one before it.
func TestClientRefusesMaskedFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		b0   byte
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		req, err := http.ReadRequest(r)
		if err != nil {
			done <- result{err: err}
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Accept: "+acceptKeyString(req.Header.Get("Sec-WebSocket-Key"))+"\r\n\r\n")
		_, _ = c.Write(clientFrame(0x81, false, []byte("plain")))
		_, _ = c.Write(clientFrame(0x81, true, []byte("masked")))
		// The client's Close frame: masked, as a client's must be.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var h [6]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			done <- result{err: err}
			return
		}
		p := make([]byte, h[1]&0x7f)
		if _, err := io.ReadFull(r, p); err != nil || len(p) < 2 {
			done <- result{b0: h[0], err: err}
			return
		}
		for i := range p {
			p[i] ^= h[2+i%4]
		}
		done <- result{b0: h[0], code: int(binary.BigEndian.Uint16(p))}
	}()

	e := nbhttp.NewEngine(nbhttp.Config{})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	got := make(chan string, 4)
	u := NewUpgrader()
	u.OnMessage(func(c *Conn, mt MessageType, data []byte) { got <- string(data) })
	d := &Dialer{Engine: e, Upgrader: u, DialTimeout: 10 * time.Second}
	c, _, err := d.Dial("ws://"+ln.Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case res := <-done:
		if res.err != nil || res.b0 != 0x88 || res.code != 1002 {
			t.Fatalf("the client's answer to a masked frame: %#x %d %v; want a Close frame 1002", res.b0, res.code, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the client")
	}
	if m := <-got; m != "plain" {
		t.Fatalf("the client got %q; want the unmasked message", m)
	}
	select {
	case m := <-got:
		t.Fatalf("the client took the masked message %q", m)
	default:
	}
}
