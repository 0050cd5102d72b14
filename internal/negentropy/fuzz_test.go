package negentropy

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
)

// messageErrors are the errors a malformed message may yield.
var messageErrors = []error{
	ErrTruncated, ErrVarint, ErrInvalidVersion, ErrUnsupportedVersion,
	ErrBoundLength, ErrBoundOrder, ErrMode,
}

func isMessageError(err error) bool {
	for _, e := range messageErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// fuzzStorage is the server's and client's storage in the fuzz targets:
// ties, shared id prefixes and spread timestamps, more than one bucket's
// worth.
func fuzzStorage(t testing.TB) *Vector {
	r := rand.New(rand.NewPCG(3, 4))
	var items []Item
	for i := range 300 {
		it := Item{Timestamp: uint64(i / 10), ID: randID(r)}
		if i%7 == 0 {
			it.ID[0], it.ID[1] = 0, 0
		}
		items = append(items, it)
	}
	return mustVector(t, items)
}

// hostile lists messages built to hurt: they must fail cleanly, without
// allocating what they announce.
var hostile = []struct {
	name string
	hex  string
	want error
}{
	{"empty", "", ErrTruncated},
	{"not a version", "00", ErrInvalidVersion},
	{"version 2", "62", ErrUnsupportedVersion},
	{"version 0", "60000000", ErrUnsupportedVersion},
	{"bound cut", "6101", ErrTruncated},
	{"mode missing", "610000", ErrTruncated},
	{"varint too long", "61ffffffffffffffffffff7f", ErrVarint},
	{"varint never ends", "61ffffffff", ErrTruncated},
	{"prefix 33 bytes", "610021" + zeros(33) + "00", ErrBoundLength},
	{"prefix cut", "6100200000", ErrTruncated},
	{"fingerprint cut", "61000001" + zeros(15), ErrTruncated},
	{"id list of 2^60 ids", "61000002" + hex.EncodeToString(appendVarint(nil, 1<<60)) + zeros(64), ErrTruncated},
	{"id list of 2^64-1 ids", "61000002" + hex.EncodeToString(appendVarint(nil, 1<<64-1)), ErrTruncated},
	{"id list short by one byte", "6100000202" + zeros(63), ErrTruncated},
	{"mode 3", "61000003", ErrMode},
	{"mode huge", "610000ffffffffffffffffff7f", ErrVarint},
	{"bounds descending by prefix", "61" + "0a0201ff00" + "010101" + "00", ErrBoundOrder},
}

func zeros(n int) string {
	return hex.EncodeToString(make([]byte, n))
}

func TestHostileMessages(t *testing.T) {
	v := fuzzStorage(t)
	for _, h := range hostile {
		msg, err := hex.DecodeString(h.hex)
		if err != nil {
			t.Fatalf("%s: %v", h.name, err)
		}
		s, _ := New(v, 0)
		reply, err := s.Reconcile(msg)
		if !errors.Is(err, h.want) {
			t.Errorf("server %s: err %v, want %v", h.name, err, h.want)
		}
		if errors.Is(err, ErrUnsupportedVersion) && string(reply) != "\x61" {
			t.Errorf("server %s: reply %x, want 61", h.name, reply)
		}
		c, _ := New(v, 0)
		if _, err := c.Initiate(); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := c.ReconcileClient(msg); !errors.Is(err, h.want) {
			t.Errorf("client %s: err %v, want %v", h.name, err, h.want)
		}
	}
	// Timestamps that overflow saturate to infinity, as in the reference:
	// a bound at 2^64-2 followed by one 5 above it is infinity.
	s, _ := New(v, 0)
	msg := append([]byte{ProtocolVersion}, appendVarint(nil, 1<<64-1)...) // 1 + (2^64-2)
	msg = append(msg, 0, modeSkip)
	msg = append(msg, appendVarint(nil, 6)...)
	msg = append(msg, 0, modeIDList, 0)
	if _, err := s.Reconcile(msg); err != nil {
		t.Errorf("saturating timestamps: %v", err)
	}
}

// TestHostileAllocations checks that a message announcing a huge id list
// is rejected without allocating for it.
func TestHostileAllocations(t *testing.T) {
	v := fuzzStorage(t)
	msg, _ := hex.DecodeString("61000002" + hex.EncodeToString(appendVarint(nil, 1<<60)) + zeros(64))
	s, _ := New(v, 0)
	c, _ := New(v, 0)
	c.Initiate()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for range runs {
		if _, err := s.Reconcile(msg); !errors.Is(err, ErrTruncated) {
			t.Fatalf("server: %v", err)
		}
		if _, _, _, err := c.ReconcileClient(msg); !errors.Is(err, ErrTruncated) {
			t.Fatalf("client: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	// The output buffers and the wrapped errors: well under a kilobyte a
	// call, where the announced list is 32 * 2^60 bytes.
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 4096 {
		t.Errorf("%d bytes allocated per message", perRun)
	}
}

// FuzzReconcile feeds arbitrary bytes to a server and to a client: they
// must not panic, must fail only with message errors, and must answer
// within the frame size limit with a well-formed message.
func FuzzReconcile(f *testing.F) {
	v := fuzzStorage(f)
	for _, h := range hostile {
		b, _ := hex.DecodeString(h.hex)
		f.Add(b, uint16(0))
	}
	// Real messages of sessions over related sets.
	r := rand.New(rand.NewPCG(5, 6))
	other := append([]Item(nil), v.items[:200]...)
	for range 100 {
		other = append(other, Item{Timestamp: r.Uint64N(40), ID: randID(r)})
	}
	c, s := New2(f, other, v, 4096)
	out := run(f, c, s, 4096, 4096)
	for _, m := range out.msgs {
		f.Add(m, uint16(0))
		f.Add(m, uint16(1))
		f.Add(m[:len(m)/2], uint16(0))
	}

	f.Fuzz(func(t *testing.T, msg []byte, sel uint16) {
		limit := []int{0, 4096, 5000}[sel%3]
		s, _ := New(v, limit)
		reply, err := s.Reconcile(msg)
		check := func(side string, reply []byte, err error) {
			if err != nil {
				if !isMessageError(err) {
					t.Fatalf("%s: error %v is not a message error", side, err)
				}
				return
			}
			if reply == nil && side == "client" {
				return // done
			}
			if _, perr := parseMessage(reply, false); perr != nil {
				t.Fatalf("%s: reply %x does not parse: %v", side, reply, perr)
			}
			if limit != 0 && len(reply) > limit {
				t.Fatalf("%s: reply of %d bytes over limit %d", side, len(reply), limit)
			}
		}
		if errors.Is(err, ErrUnsupportedVersion) {
			if string(reply) != "\x61" {
				t.Fatalf("unsupported version: reply %x", reply)
			}
			err = nil
		}
		check("server", reply, err)

		c, _ := New(v, limit)
		if _, err := c.Initiate(); err != nil {
			t.Fatal(err)
		}
		next, have, need, err := c.ReconcileClient(msg)
		check("client", next, err)
		if err == nil && next != nil && len(next) == 1 {
			t.Fatalf("client: next is a bare version byte")
		}
		if len(have) > v.Len() || len(need) > len(msg)/IDSize {
			t.Fatalf("client: %d have, %d need from a %d-byte message", len(have), len(need), len(msg))
		}
	})
}

// New2 makes a client over items and a server over v, both with limit.
func New2(t testing.TB, items []Item, v *Vector, limit int) (*Negentropy, *Negentropy) {
	t.Helper()
	c, err := New(mustVector(t, items), limit)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(v, limit)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// FuzzDecodeMessage is the relay's side of a NEG-MSG alone: a server
// over a small set decodes the message and answers it. The decoding is
// the code FuzzReconcile reaches too, at a fraction of the cost per input
// (one side, 20 items instead of both sides over 300), so that it gets
// tens of millions of inputs. It must not panic, must fail only with
// message errors, and must answer within the frame size limit with a
// well-formed message.
func FuzzDecodeMessage(f *testing.F) {
	v := mustVector(f, fuzzStorage(f).items[:20])
	for _, h := range hostile {
		b, _ := hex.DecodeString(h.hex)
		f.Add(b, uint8(0))
	}
	c, _ := New(v, 0)
	if m, err := c.Initiate(); err == nil {
		f.Add(m, uint8(0))
		f.Add(m, uint8(1))
	}
	f.Fuzz(func(t *testing.T, msg []byte, sel uint8) {
		limit := []int{0, 4096, 5000}[sel%3]
		s, err := New(v, limit)
		if err != nil {
			t.Fatal(err)
		}
		reply, err := s.Reconcile(msg)
		switch {
		case errors.Is(err, ErrUnsupportedVersion):
			if string(reply) != "\x61" {
				t.Fatalf("unsupported version: reply %x", reply)
			}
		case err != nil:
			if !isMessageError(err) {
				t.Fatalf("error %v is not a message error", err)
			}
		default:
			if _, perr := parseMessage(reply, false); perr != nil {
				t.Fatalf("reply %x does not parse: %v", reply, perr)
			}
			if limit != 0 && len(reply) > limit {
				t.Fatalf("reply of %d bytes over limit %d", len(reply), limit)
			}
		}
	})
}
