package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/klauspost/compress/flate"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// serverFrame is an unmasked frame as a server sends it.
func serverFrame(fin bool, rsv1 bool, op byte, p []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	if rsv1 {
		b0 |= 0x40
	}
	var h []byte
	switch n := len(p); {
	case n > 0xffff:
		h = binary.BigEndian.AppendUint64([]byte{b0, 127}, uint64(n))
	case n > 125:
		h = binary.BigEndian.AppendUint16([]byte{b0, 126}, uint16(n))
	default:
		h = []byte{b0, byte(n)}
	}
	return append(h, p...)
}

// unmask reads one client frame: it must be final and masked.
func unmask(t *testing.T, b []byte) (op byte, p []byte) {
	t.Helper()
	if b[0]&0x80 == 0 || b[1]&0x80 == 0 {
		t.Fatalf("client frame %x: not final or not masked", b[:2])
	}
	n, h := int(b[1]&0x7f), 2
	switch n {
	case 126:
		n, h = int(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		n, h = int(binary.BigEndian.Uint64(b[2:])), 10
	}
	mask := b[h : h+4]
	p = make([]byte, n)
	for i := range p {
		p[i] = b[h+4+i] ^ mask[i&3]
	}
	if len(b) != h+4+n {
		t.Fatalf("client frame of %d bytes, header says %d", len(b), h+4+n)
	}
	return b[0] & 0x0f, p
}

func TestClientFrame(t *testing.T) {
	for _, n := range []int{0, 125, 126, 0xffff, 0x10000} {
		p := bytes.Repeat([]byte("ab"), n)[:n]
		op, got := unmask(t, clientFrame(wsText, p))
		if op != wsText || !bytes.Equal(got, p) {
			t.Fatalf("%d bytes: op %d, payload differs", n, op)
		}
	}
}

// TestLeanFrames: messages split at every byte across reads, fragmented
// messages, and control frames between fragments are parsed into the
// same messages; a ping is answered with a pong of its payload.
func TestLeanFrames(t *testing.T) {
	long := strings.Repeat("x", 300)
	var stream []byte
	stream = append(stream, serverFrame(true, false, wsText, []byte(`["EOSE","c0"]`))...)
	stream = append(stream, serverFrame(true, false, wsText, []byte(long))...)
	stream = append(stream, serverFrame(false, false, wsText, []byte("frag"))...)
	stream = append(stream, serverFrame(true, false, wsPing, []byte("pp"))...)
	stream = append(stream, serverFrame(false, false, wsCont, []byte("men"))...)
	stream = append(stream, serverFrame(true, false, wsCont, []byte("ted"))...)
	want := []string{`["EOSE","c0"]`, long, "fragmented"}
	for split := 1; split < len(stream); split += 7 {
		a, b := net.Pipe()
		sent := make(chan []byte, 1)
		go func() {
			buf := make([]byte, 64)
			n, _ := b.Read(buf)
			sent <- buf[:n]
		}()
		c := &leanConn{raw: a}
		var got []string
		msg := func(_ *leanConn, d []byte) { got = append(got, string(d)) }
		c.onData(append([]byte(nil), stream[:split]...), msg)
		c.onData(append([]byte(nil), stream[split:]...), msg)
		if strings.Join(got, "|") != strings.Join(want, "|") || c.rest != nil || c.frag != nil {
			t.Fatalf("split at %d: %q (rest %d, frag %d)", split, got, len(c.rest), len(c.frag))
		}
		if op, p := unmask(t, <-sent); op != wsPong || string(p) != "pp" {
			t.Fatalf("split at %d: answered the ping with op %d %q", split, op, p)
		}
		a.Close()
		b.Close()
	}
}

// TestLeanCloseAndProtocolErrors: a close frame ends the connection as
// lost with the relay's code and reason; a masked or unknown frame ends
// it as a protocol error.
func TestLeanCloseAndProtocolErrors(t *testing.T) {
	nop := func(*leanConn, []byte) {}
	a, b := net.Pipe()
	go io.Copy(io.Discard, b)
	c := &leanConn{raw: a}
	c.onData(serverFrame(true, false, wsClose, append([]byte{0x03, 0xe9}, "going away"...)), nop)
	if !c.Lost() || c.Err() == nil || c.Err().Error() != "websocket: close 1001 going away" {
		t.Fatalf("after a close frame: lost %v, err %v", c.Lost(), c.Err())
	}
	for name, f := range map[string][]byte{
		"masked":   {0x81, 0x81, 1, 2, 3, 4, 'x'},
		"opcode 3": {0x83, 0x00},
		"rsv2":     {0xa1, 0x00},
		"cont":     {0x80, 0x00},
	} {
		a, b := net.Pipe()
		go io.Copy(io.Discard, b)
		c := &leanConn{raw: a}
		c.onData(f, nop)
		if !c.Lost() || !errors.Is(c.Err(), errProtocol) {
			t.Errorf("%s: lost %v, err %v", name, c.Lost(), c.Err())
		}
		b.Close()
	}
}

// TestLeanInflate: a permessage-deflate message (RSV1) is inflated when
// the extension was negotiated, and refused when it was not.
func TestLeanInflate(t *testing.T) {
	msg := []byte(`["EVENT","c1",{"id":"` + strings.Repeat("ab", 32) + `","content":"` + strings.Repeat("hello ", 50) + `"}]`)
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestSpeed)
	w.Write(msg)
	w.Flush()
	p := bytes.TrimSuffix(z.Bytes(), []byte{0x00, 0x00, 0xff, 0xff})
	var got []byte
	c := &leanConn{}
	c.state.Or(lsDeflate)
	c.onData(serverFrame(true, true, wsText, p), func(_ *leanConn, d []byte) { got = append(got, d...) })
	if !bytes.Equal(got, msg) || c.Lost() {
		t.Fatalf("inflated %q, lost %v %v", got, c.Lost(), c.Err())
	}
	c = &leanConn{}
	c.onData(serverFrame(true, true, wsText, p), func(*leanConn, []byte) { t.Fatal("delivered without the extension") })
	if !c.Lost() || !errors.Is(c.Err(), errProtocol) {
		t.Fatalf("without the extension: lost %v, err %v", c.Lost(), c.Err())
	}
}

func TestReadUpgrade(t *testing.T) {
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	ok := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
	buf := make([]byte, 4096)
	z, rest, err := readUpgrade(strings.NewReader(ok+"\r\n\x81\x02hi"), buf, key)
	if err != nil || z || string(rest) != "\x81\x02hi" {
		t.Fatalf("101: deflate %v rest %q err %v", z, rest, err)
	}
	z, _, err = readUpgrade(strings.NewReader(ok+"Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n\r\n"), buf, key)
	if err != nil || !z {
		t.Fatalf("deflate: %v %v", z, err)
	}
	for name, resp := range map[string]string{
		"wrong accept": strings.Replace(ok, "s3pP", "AAAA", 1) + "\r\n",
		"503":          "HTTP/1.1 503 Service Unavailable\r\n\r\n",
		"not http":     "SSH-2.0\r\n\r\n",
	} {
		if _, _, err := readUpgrade(strings.NewReader(resp), buf, key); !errors.Is(err, ErrHandshake) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := readUpgrade(strings.NewReader(ok), buf, key); err == nil || errors.Is(err, ErrHandshake) || strings.Contains(err.Error(), "without answering") {
		t.Errorf("truncated: %v", err)
	}
	// Closed before a byte (a relay's connection cap): said so, the
	// cause kept.
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for cause, r := range map[error]io.Reader{
		io.EOF: strings.NewReader(""),
		reset:  iotest.ErrReader(reset),
	} {
		_, _, err := readUpgrade(r, buf, key)
		if err == nil || !strings.Contains(err.Error(), "closed the connection without answering") || !errors.Is(err, cause) || errors.Is(err, ErrHandshake) {
			t.Errorf("closed unanswered (%v): %v", cause, err)
		}
	}
	// The header must fit the buffer: at its size accepted, one past refused.
	pad := func(total int) string {
		h := ok + "X-Pad: "
		return h + strings.Repeat("p", total-len(h)-4) + "\r\n\r\n"
	}
	small := make([]byte, 512)
	if _, _, err := readUpgrade(strings.NewReader(pad(512)), small, key); err != nil {
		t.Errorf("a 512-byte header in 512 bytes: %v", err)
	}
	if _, _, err := readUpgrade(strings.NewReader(pad(513)), small, key); !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "over 512 bytes") {
		t.Errorf("a 513-byte header in 512 bytes: %v", err)
	}
}

// TestE2EConnsPings: with an idle timeout shorter than the hold, the
// relay pings every connection during it; the client answers, and every
// connection is held and receives the event.
func TestE2EConnsPings(t *testing.T) {
	// Pings from 1 s idle; a connection that has not answered by 2 s is
	// closed, well inside the hold.
	rl := relaytest.Start(t, relaytest.Options{Relay: relay.Config{IdleTimeout: 2 * time.Second}})
	o := testOptions(rl.URL)
	o.Conns = 50
	o.PerIP = 25
	o.Hold = 3500 * time.Millisecond
	res, err := Conns(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	if c := res.Conns; c.Held != 50 || c.LivenessReceived != 50 {
		t.Fatalf("conns %+v", c)
	}
}

// TestE2EConnsCompress: --compress negotiates permessage-deflate on every
// connection, and every delivery is counted exactly once.
func TestE2EConnsCompress(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	o := testOptions(rl.URL)
	o.Conns = 40
	o.LiveEvents = 3
	o.Hold = 100 * time.Millisecond
	o.Compress = true
	res, err := Conns(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	if c := res.Conns; c.Held != 40 || c.LivenessReceived != 120 || c.LivenessExpected != 120 {
		t.Fatalf("conns %+v", c)
	}
	if res.Wire == nil || res.Wire.Negotiated != 41 { // and the publisher
		t.Fatalf("wire %+v", res.Wire)
	}
}

// TestE2EConnsPerIPLimit: with the relay's max_connections_per_ip at 5,
// 5 connections a source address all subscribe; at 6, exactly one a
// source address is refused, and every other connection still receives
// the event exactly once.
func TestE2EConnsPerIPLimit(t *testing.T) {
	// A relay each: the first run's connections must not hold slots
	// in the second.
	start := func() string {
		return relaytest.Start(t, relaytest.Options{Server: server.Config{MaxConnectionsPerIP: 5}}).URL
	}
	o := testOptions(start())
	o.Hold = 100 * time.Millisecond
	o.Conns, o.PerIP = 10, 5
	res, err := Conns(o)
	if err != nil {
		t.Fatal(err)
	}
	exact(t, res)
	if c := res.Conns; c.SourceAddrs != 2 || c.Subscribed != 10 || c.LivenessReceived != 10 {
		t.Fatalf("at the limit: %+v", c)
	}
	o.URL = start()
	o.Conns, o.PerIP = 12, 6
	res, err = Conns(o)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Conns
	if !res.Failed() || c.SourceAddrs != 2 || c.DialFailed != 2 || c.Subscribed != 10 || c.Held != 10 ||
		c.LivenessExpected != 10 || c.LivenessReceived != 10 || c.LivenessDuplicated != 0 {
		t.Fatalf("one past the limit: failed %v %+v", res.Failed(), c)
	}
	// The relay closes the connection unanswered: the client reads EOF
	// or a reset, or cannot write its request.
	n := 0
	for _, e := range c.Errors {
		var k int
		var rest string
		if _, err := fmt.Sscanf(e, "%d× %s", &k, &rest); err != nil || !strings.HasPrefix(rest, "dial") {
			t.Fatalf("one past the limit: error %q", e)
		}
		n += k
	}
	if n != 2 {
		t.Fatalf("one past the limit: errors %q", c.Errors)
	}
}

// TestE2EConnsPerProcessLimit: Options.PerProcess connections are held by
// this process; one more starts worker processes, and either way every
// subscription receives the event exactly once.
func TestE2EConnsPerProcessLimit(t *testing.T) {
	rl := relaytest.Start(t, relaytest.Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(workerEnv, "1")
	o := testOptions(rl.URL)
	o.PerProcess = 20
	o.PerIP = 10
	o.Hold = 100 * time.Millisecond
	o.WorkerCommand = []string{exe}
	for _, n := range []int{20, 21} {
		o.Conns = n
		o.Seed++
		res, err := Conns(o)
		if err != nil {
			t.Fatal(err)
		}
		exact(t, res)
		c := res.Conns
		if want := 1 + (n-1)/20; c.Processes != want || c.Held != n || c.LivenessReceived != n {
			t.Fatalf("%d connections: %d processes (want %d), %+v", n, c.Processes, want, c)
		}
		if n > 20 && c.ClientRSSPerConn <= 0 { // the workers' whole RSS
			t.Fatalf("%d connections: client RSS per connection %v", n, c.ClientRSSPerConn)
		}
	}
}
