package deflate

import (
	"bytes"
	"compress/flate"
	"io"
	"testing"
)

// inflate decompresses a permessage-deflate message with compress/flate,
// as RFC 7692 7.2.2 has the receiver do: the message, then 00 00 ff ff.
func inflate(t testing.TB, msg []byte) []byte {
	t.Helper()
	in := append(append([]byte(nil), msg...), 0x00, 0x00, 0xff, 0xff)
	r := flate.NewReader(bytes.NewReader(in))
	out, err := io.ReadAll(r)
	if err != nil && err != io.ErrUnexpectedEOF {
		t.Fatalf("inflate: %v", err)
	}
	return out
}

// assemble builds an EVENT frame's payload the way the relay does: the
// prefix as a stored part, the body (raw and "]") compressed once as the
// last part.
func assemble(c *Codec, prefix, raw []byte) []byte {
	msg := AppendStored(nil, prefix)
	return append(msg, c.AppendLast(nil, raw, []byte("]"))...)
}

func TestAssembledFrameInflates(t *testing.T) {
	raw := []byte(`{"id":"8f1c4b2a9d3e5f6071829a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3","pubkey":"3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d","created_at":1700000000,"kind":1,"tags":[["p","3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"]],"content":"hello hello hello","sig":"00"}`)
	for level := 1; level <= 9; level++ {
		c, err := New(level)
		if err != nil {
			t.Fatal(err)
		}
		for _, prefix := range []string{`["EVENT","a",`, `["EVENT","feed-0123456789",`, `["EVENT","",`} {
			got := inflate(t, assemble(c, []byte(prefix), raw))
			if want := prefix + string(raw) + "]"; string(got) != want {
				t.Fatalf("level %d prefix %q: inflated %q", level, prefix, got)
			}
		}
	}
	if _, err := New(0); err == nil {
		t.Fatal("level 0 accepted")
	}
	if _, err := New(10); err == nil {
		t.Fatal("level 10 accepted")
	}
}

// TestSmallEventCompresses: a short event, mostly hex without repeats,
// which the compressor at levels 1 to 6 would store as it is, is made
// smaller by Huffman coding alone (and still inflates).
func TestSmallEventCompresses(t *testing.T) {
	raw := []byte(`{"id":"cb6c64915f18083958449f9ad453c30baf9f637d3bb3b0c57362adf5083c008e","pubkey":"17119afac729bf47745ffe798ed55d03b9dcf874c1d6f2f047b57fd4bd060354","created_at":1796153405,"kind":1,"tags":[],"content":"gm","sig":"fda1d0e9275e701c5e5dfa3305bf6e5cbcf4d58591d0780c6ca20b57a18c13fe0da32d49a04a16641595023446a999ae41537ea359546fa895e5ef9b0137caff"}`)
	for level := 1; level <= 9; level++ {
		c, _ := New(level)
		z := c.AppendLast(nil, raw, []byte("]"))
		if len(z) > len(raw)*3/4 {
			t.Errorf("level %d: %d bytes compressed to %d", level, len(raw)+1, len(z))
		}
		if got := inflate(t, z); string(got) != string(raw)+"]" {
			t.Fatalf("level %d: inflated %q", level, got)
		}
	}
}

// TestPartsConcatenate: any sequence of parts, stored or compressed at
// any level, with the last one's flush dropped, inflates to the
// concatenation of their inputs.
func TestPartsConcatenate(t *testing.T) {
	c1, _ := New(1)
	c9, _ := New(9)
	parts := [][]byte{[]byte("abcabcabc"), bytes.Repeat([]byte("x"), 70000), nil, []byte(`"]`)}
	var msg, want []byte
	for i, p := range parts {
		want = append(want, p...)
		last := i == len(parts)-1
		switch {
		case last:
			msg = c9.AppendLast(msg, p)
		case len(p) <= MaxStored && i%2 == 0:
			msg = AppendStored(msg, p)
		default:
			msg = c1.AppendPart(msg, p)
		}
	}
	if got := inflate(t, msg); !bytes.Equal(got, want) {
		t.Fatalf("inflated %d bytes; want %d", len(got), len(want))
	}
}

// FuzzAssembledFrame: every frame assembled from a stored prefix and a
// body compressed once inflates, with compress/flate as the reference
// inflater, to exactly the uncompressed frame.
func FuzzAssembledFrame(f *testing.F) {
	f.Add([]byte("sub"), []byte(`{"kind":1,"content":"hi"}`), uint8(1))
	f.Add([]byte(""), []byte(""), uint8(9))
	f.Add([]byte(`a"b\u0000`), bytes.Repeat([]byte("0123456789abcdef"), 300), uint8(6))
	codecs := make([]*Codec, 10)
	for l := 1; l <= 9; l++ {
		codecs[l], _ = New(l)
	}
	f.Fuzz(func(t *testing.T, subid, raw []byte, level uint8) {
		c := codecs[1+int(level)%9]
		if len(subid) > 1000 {
			subid = subid[:1000]
		}
		prefix := append(append([]byte(`["EVENT","`), subid...), `",`...)
		got := inflate(t, assemble(c, prefix, raw))
		want := append(append(prefix, raw...), ']')
		if !bytes.Equal(got, want) {
			t.Fatalf("level %d: inflated %q; want %q", c.level, got, want)
		}
	})
}

func BenchmarkAppendLast(b *testing.B) {
	raw := []byte(`{"id":"8f1c4b2a9d3e5f6071829a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3","pubkey":"3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d","created_at":1700000000,"kind":1,"tags":[["e","5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36","","root"],["p","3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"]],"content":"GM nostr! Another day, another note about relays and compression.","sig":"908a15e46fb4d8675bab026fc230a0e3542bfade63da02d542fb78b2a8513fcd0092619a2c8c1221e581946e0191f2af505dfdf8657a414dbca329186f009262"}`)
	for _, level := range []int{1, 6, 9} {
		c, _ := New(level)
		b.Run("level="+string(rune('0'+level)), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 4096)
			var n int
			for b.Loop() {
				n = len(c.AppendLast(buf[:0], raw, []byte("]")))
			}
			b.ReportMetric(float64(n)/float64(len(raw)+1), "ratio")
		})
	}
}
