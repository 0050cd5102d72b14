package server_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// rawWS is a WebSocket client that writes exactly the bytes a test gives
// it, valid frames or not, and reads the relay's frames as they come.
type rawWS struct {
	t   testing.TB
	c   net.Conn
	r   *bufio.Reader
	b0  byte   // the first byte of the last frame read (FIN, RSV, opcode)
	ext string // the Sec-WebSocket-Extensions the relay answered
}

// dialRaw connects to addr (host:port) and upgrades with a hand-written
// handshake.
func dialRaw(t testing.TB, addr string) *rawWS {
	t.Helper()
	return dialRawOffer(t, addr, "")
}

// dialRawOffer is dialRaw offering the extensions ext ("": none).
func dialRawOffer(t testing.TB, addr, ext string) *rawWS {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
	if ext != "" {
		req += "Sec-WebSocket-Extensions: " + ext + "\r\n"
	}
	req += "\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", res.Status)
	}
	return &rawWS{t: t, c: c, r: r, ext: res.Header.Get("Sec-WebSocket-Extensions")}
}

// maskKey is the key rawFrame masks with.
var maskKey = [4]byte{0x37, 0xfa, 0x21, 0x3d}

// rawFrame builds a frame: first byte b0 (FIN, RSV bits, opcode) and
// the payload, masked (as a client must) when mask is set.
func rawFrame(b0 byte, mask bool, payload []byte) []byte {
	f := rawHeader(b0, mask, uint64(len(payload)))
	if !mask {
		return append(f, payload...)
	}
	for i, b := range payload {
		f = append(f, b^maskKey[i%4])
	}
	return f
}

// rawHeader builds a frame's header alone, announcing length bytes (in
// the shortest form), with the mask key when mask is set.
func rawHeader(b0 byte, mask bool, length uint64) []byte {
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
		f = append(f, maskKey[:]...)
	}
	return f
}

// send writes b as it is.
func (w *rawWS) send(b []byte) {
	w.t.Helper()
	if _, err := w.c.Write(b); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one unmasked, unfragmented frame of the relay's.
func (w *rawWS) readFrame() (opcode byte, payload []byte, err error) {
	_ = w.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h [2]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 {
		return 0, nil, errors.New("the relay masked a frame")
	}
	w.b0 = h[0]
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(w.r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(w.r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return 0, nil, errors.New("frame over 1 MiB")
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(w.r, payload); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, payload, nil
}

// expectClose reads the relay's next frame, which must be a Close with
// the given code, and then the end of the TCP stream.
func (w *rawWS) expectClose(code int) {
	w.t.Helper()
	op, payload, err := w.readFrame()
	if err != nil {
		w.t.Fatalf("want a Close frame %d: %v", code, err)
	}
	if op != 0x8 || len(payload) < 2 {
		w.t.Fatalf("want a Close frame %d; got opcode %#x %q", code, op, payload)
	}
	if got := int(binary.BigEndian.Uint16(payload)); got != code {
		w.t.Fatalf("Close frame %d %q; want %d", got, payload[2:], code)
	}
	w.expectEOF()
}

// expectEOF reads until the relay closes the TCP connection; no frame
// may come first.
func (w *rawWS) expectEOF() {
	w.t.Helper()
	_ = w.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := w.r.Read(make([]byte, 1))
	if n != 0 || (err != io.EOF && !isReset(err)) {
		w.t.Fatalf("want the connection closed: read %d bytes, %v", n, err)
	}
}

// isReset reports a connection reset (the relay closed with unread
// bytes of the client's still in its socket).
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET)
}
