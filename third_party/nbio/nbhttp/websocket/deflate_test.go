package websocket

import (
	"bufio"
	"bytes"
	"compress/flate"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp"
)

// upgradeWithOffer upgrades a connection to addr offering the extensions
// in offer ("" for none) and returns the response's
// Sec-WebSocket-Extensions.
func upgradeWithOffer(t *testing.T, addr, offer string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
	if offer != "" {
		req += "Sec-WebSocket-Extensions: " + offer + "\r\n"
	}
	_, _ = io.WriteString(c, req+"\r\n")
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(r, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	return c, r, res.Header.Get("Sec-WebSocket-Extensions")
}

// startRecorder starts an engine that sends the length of every message
// it gets, and each connection's CompressionWindowBits, on the returned
// channels.
func startRecorder(t *testing.T, limit int) (string, chan int, chan int) {
	t.Helper()
	got := make(chan int, 16)
	bits := make(chan int, 16)
	u := NewUpgrader()
	u.KeepaliveTime = 0
	u.MessageLengthLimit = limit
	u.EnableCompression(true)
	u.OnMessage(func(c *Conn, mt MessageType, data []byte) { got <- len(data) })
	e := nbhttp.NewEngine(nbhttp.Config{
		Network:                      "tcp",
		Addrs:                        []string{"127.0.0.1:0"},
		MaxWebsocketFramePayloadSize: limit,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c, err := u.Upgrade(w, r, nil); err == nil {
				bits <- c.CompressionWindowBits()
			}
		}),
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e.Addrs[0], got, bits
}

// TestDeflateNegotiation: the server accepts the first permessage-deflate
// offer whose parameters RFC 7692 defines, with valid values, always
// without context takeover on either side, and keeps to (and echoes) a
// server_max_window_bits the client asks for. Before the patch every
// offer was accepted whatever its parameters, and a requested window was
// neither echoed nor known to the application.
func TestDeflateNegotiation(t *testing.T) {
	addr, _, bits := startRecorder(t, 1000)
	const base = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
	f := func(offer, want string, wantBits int) {
		t.Helper()
		_, _, ext := upgradeWithOffer(t, addr, offer)
		if ext != want {
			t.Errorf("offer %q: response %q; want %q", offer, ext, want)
		}
		if b := <-bits; b != wantBits {
			t.Errorf("offer %q: CompressionWindowBits %d; want %d", offer, b, wantBits)
		}
	}
	f("", "", 0)
	f("x-webkit-deflate-frame", "", 0)
	f("permessage-deflate", base, 15)
	f("permessage-deflate; client_max_window_bits", base, 15) // browsers, Node's ws
	f("permessage-deflate; server_no_context_takeover; client_no_context_takeover", base, 15)
	f("permessage-deflate; client_max_window_bits=10", base, 15)
	f("permessage-deflate; server_max_window_bits=10", base+"; server_max_window_bits=10", 10)
	f("permessage-deflate; server_max_window_bits=8", base+"; server_max_window_bits=8", 8)
	f("permessage-deflate; server_max_window_bits=15", base+"; server_max_window_bits=15", 15)
	// Declined: values out of range or malformed, unknown parameters.
	f("permessage-deflate; server_max_window_bits=7", "", 0)
	f("permessage-deflate; server_max_window_bits=16", "", 0)
	f("permessage-deflate; server_max_window_bits", "", 0)
	f("permessage-deflate; server_max_window_bits=010", "", 0)
	f("permessage-deflate; client_max_window_bits=99", "", 0)
	f("permessage-deflate; server_no_context_takeover=1", "", 0)
	f("permessage-deflate; mystery", "", 0)
	// The first acceptable offer of several wins.
	f("permessage-deflate; mystery, permessage-deflate; server_max_window_bits=12", base+"; server_max_window_bits=12", 12)
}

// deflateMessage returns p compressed as a permessage-deflate message.
func deflateMessage(t *testing.T, p []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	_, _ = fw.Write(p)
	_ = fw.Flush()
	return bytes.TrimSuffix(buf.Bytes(), []byte{0, 0, 0xff, 0xff})
}

// TestDeflateAtTheLimit: a compressed message that inflates to exactly the
// message limit is delivered; one byte more is answered with Close 1009.
// Before the patch the second was delivered (inflating read up to the
// capacity the allocator gave, which it rounds up past the limit).
func TestDeflateAtTheLimit(t *testing.T) {
	const limit = 4096
	addr, got, _ := startRecorder(t, limit)
	for _, size := range []int{limit - 1, limit} {
		c, _, _ := upgradeWithOffer(t, addr, "permessage-deflate")
		msg := bytes.Repeat([]byte("a"), size)
		_, _ = c.Write(clientFrame(0xc2, true, deflateMessage(t, msg)))
		select {
		case n := <-got:
			if n != size {
				t.Fatalf("message of %d bytes delivered as %d", size, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message of %d bytes (limit %d) not delivered", size, limit)
		}
	}
	c, r, _ := upgradeWithOffer(t, addr, "permessage-deflate")
	_, _ = c.Write(clientFrame(0xc2, true, deflateMessage(t, bytes.Repeat([]byte("a"), limit+1))))
	expectCloseFrame(t, c, r, 1009)
	select {
	case n := <-got:
		t.Fatalf("message over the limit delivered (%d bytes)", n)
	default:
	}
}
