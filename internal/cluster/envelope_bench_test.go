package cluster

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// The envelope's fields could travel as NATS headers instead of a binary
// header. These benchmarks measure both, encode and decode, in process
// (headers written as nats.go writes them, read with its decoder, as its
// subscriber does for every message that has them) and through a real
// server.

var benchFields = struct {
	name           string
	boot, seq, com uint64
	bootTime, sent int64
}{"node-1", 0x0102030405060708, 123456, 987654321, 1_700_000_000_123_456_789, 1_700_000_001_000_000_000}

// headerEnvelope is the envelope as NATS headers.
func headerEnvelope(b *bytes.Buffer) nats.Header {
	f := benchFields
	h := nats.Header{
		"Petrel-Type":      {"1"},
		"Petrel-Origin":    {f.name},
		"Petrel-Boot":      {strconv.FormatUint(f.boot, 16)},
		"Petrel-Boot-Time": {strconv.FormatInt(f.bootTime, 10)},
		"Petrel-Seq":       {strconv.FormatUint(f.seq, 10)},
		"Petrel-Sent":      {strconv.FormatInt(f.sent, 10)},
		"Petrel-Commit":    {strconv.FormatUint(f.com, 10)},
	}
	if b != nil { // the bytes nats.go's PublishMsg writes for them
		b.WriteString("NATS/1.0\r\n")
		for k, vs := range h {
			for _, v := range vs {
				b.WriteString(k)
				b.WriteString(": ")
				b.WriteString(v)
				b.WriteString("\r\n")
			}
		}
		b.WriteString("\r\n")
	}
	return h
}

func readHeaderEnvelope(h nats.Header, e *envelope) error {
	var err error
	u := func(k string) uint64 {
		v, perr := strconv.ParseUint(h.Get(k), 10, 64)
		if perr != nil {
			err = perr
		}
		return v
	}
	e.typ = byte(u("Petrel-Type"))
	e.name = []byte(h.Get("Petrel-Origin"))
	e.boot, err = strconv.ParseUint(h.Get("Petrel-Boot"), 16, 64)
	e.bootTime = int64(u("Petrel-Boot-Time"))
	e.seq = u("Petrel-Seq")
	e.sent = int64(u("Petrel-Sent"))
	e.commit = u("Petrel-Commit")
	return err
}

func BenchmarkEnvelope(b *testing.B) {
	raw := relaytest.NewKey("bench").Note("a note of ordinary length, about as long as most notes are on relays today").Raw
	f := benchFields
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		origin := originHeader(f.name, f.boot, f.bootTime)
		buf := make([]byte, 0, 4096)
		var e envelope
		for b.Loop() {
			buf = appendEnvelope(buf[:0], envEvent, origin, f.seq, f.sent, f.com, raw)
			if err := decodeEnvelope(buf, &e); err != nil || e.seq != f.seq {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)-len(raw)), "overhead-bytes")
	})
	b.Run("headers", func(b *testing.B) {
		b.ReportAllocs()
		var hb bytes.Buffer
		var e envelope
		var n int
		for b.Loop() {
			hb.Reset()
			headerEnvelope(&hb)
			n = hb.Len()
			h, err := nats.DecodeHeadersMsg(hb.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			if err := readHeaderEnvelope(h, &e); err != nil || e.seq != f.seq {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n), "overhead-bytes")
	})
}

// BenchmarkEnvelopeWire: publish and receive through the machine's NATS
// server, each way.
func BenchmarkEnvelopeWire(b *testing.B) {
	url := sharedNATS(b)
	raw := relaytest.NewKey("bench").Note("a note of ordinary length, about as long as most notes are on relays today").Raw
	f := benchFields
	run := func(b *testing.B, send func(nc *nats.Conn, subject string) error, recv func(m *nats.Msg) error) {
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		subject := testSubject(b)
		sub, err := nc.SubscribeSync(subject)
		if err != nil {
			b.Fatal(err)
		}
		sub.SetPendingLimits(-1, -1)
		nc.Flush()
		b.ReportAllocs()
		for b.Loop() {
			if err := send(nc, subject); err != nil {
				b.Fatal(err)
			}
			m, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := recv(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("binary", func(b *testing.B) {
		origin := originHeader(f.name, f.boot, f.bootTime)
		buf := make([]byte, 0, 4096)
		var e envelope
		run(b, func(nc *nats.Conn, subject string) error {
			buf = appendEnvelope(buf[:0], envEvent, origin, f.seq, f.sent, f.com, raw)
			return nc.Publish(subject, buf)
		}, func(m *nats.Msg) error { return decodeEnvelope(m.Data, &e) })
	})
	b.Run("headers", func(b *testing.B) {
		var e envelope
		run(b, func(nc *nats.Conn, subject string) error {
			return nc.PublishMsg(&nats.Msg{Subject: subject, Header: headerEnvelope(nil), Data: raw})
		}, func(m *nats.Msg) error { return readHeaderEnvelope(m.Header, &e) })
	})
}
