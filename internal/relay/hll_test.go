package relay

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestHLLOffset(t *testing.T) {
	f := func(v string, want int) {
		t.Helper()
		if got := hllOffset(v); got != want {
			t.Fatalf("hllOffset(%q) = %d, want %d", v, got, want)
		}
	}
	hex := func(c32 byte) string { return strings.Repeat("1", 32) + string(c32) + strings.Repeat("2", 31) }
	f(hex('0'), 8)
	f(hex('9'), 17)
	f(hex('a'), 18)
	f(hex('f'), 23)
	// An address: its pubkey's character 32.
	f("30023:"+hex('c')+":my-article", 20)
	f("3:"+hex('4'), 12)
	// Anything else: the hex SHA-256. sha256("hello") =
	// 2cf24dba5fb0a30e26e83b2ac5b9e29e 1b161e5c... : character 32 is '1'.
	f("hello", 9)
	// Upper-case hex is not a NIP-01 id: it is hashed like any string.
	up := strings.ToUpper(hex('a'))
	sum := sha256.Sum256([]byte(up))
	d, _ := strconv.ParseUint(fmt.Sprintf("%x", sum)[32:33], 16, 8)
	f(up, int(d)+8)
}

func TestHLLAdd(t *testing.T) {
	// Hand-computed registers for offset 8 (and 23).
	var reg [hllRegisters]uint8
	pk := func(off int, b ...byte) *nostr.PubKey {
		var p nostr.PubKey
		for i := range p {
			p[i] = 0xee // noise outside the 8 bytes read
		}
		copy(p[off:], b)
		return &p
	}
	// Register 5: 0x00 then 0x10 = 00000000 0001.... : 11 zeros, +1 = 12.
	hllAdd(&reg, 8, pk(8, 0x05, 0x00, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff))
	// Register 5 again: 0x80 = 1...: 0 zeros, +1 = 1, smaller: kept 12.
	hllAdd(&reg, 8, pk(8, 0x05, 0x80, 0, 0, 0, 0, 0, 0))
	// Register 255: 56 zero bits (the cap), +1 = 57.
	hllAdd(&reg, 8, pk(8, 0xff, 0, 0, 0, 0, 0, 0, 0))
	// Register 1 at the largest offset: 0x40 = 01......: 1 zero, +1 = 2.
	hllAdd(&reg, 23, pk(23, 0x01, 0x40, 0, 0, 0, 0, 0, 0))
	// Register 7: seven zero bytes but the last bit set: 55 zeros, +1 = 56.
	hllAdd(&reg, 8, pk(8, 0x07, 0, 0, 0, 0, 0, 0, 0x01))
	want := map[int]uint8{5: 12, 255: 57, 1: 2, 7: 56}
	for i, v := range reg {
		if v != want[i] {
			t.Fatalf("register %d = %d, want %d", i, v, want[i])
		}
	}
}

func TestHLLFilter(t *testing.T) {
	id := strings.Repeat("a", 64)
	f := func(js string, want int, wantOK bool) {
		t.Helper()
		flt, err := nostr.ParseFilter([]byte(js), nil)
		if err != nil {
			t.Fatal(err)
		}
		off, ok := hllFilter([]nostr.Filter{flt})
		if ok != wantOK || (ok && off != want) {
			t.Fatalf("hllFilter(%s) = %d %v, want %d %v", js, off, ok, want, wantOK)
		}
	}
	f(`{"kinds":[7],"#e":["`+id+`"]}`, 18, true)
	f(`{"kinds":[3],"#p":["`+id+`"]}`, 18, true)
	f(`{"#t":["hello"]}`, 9, true)
	f(`{"kinds":[7]}`, 0, false)                          // no tag condition
	f(`{"#e":["`+id+`"],"#p":["`+id+`"]}`, 0, false)      // two: order unknown
	f(`{"#e":["`+id+`"],"search":"x"}`, 0, false)         // search
	f(`{"#e":["`+id+`"],"since":10,"until":5}`, 0, false) // empty
	if _, ok := hllFilter([]nostr.Filter{{}, {}}); ok {
		t.Fatal("two filters qualified")
	}
}

func BenchmarkHLLAdd(b *testing.B) {
	var reg [hllRegisters]uint8
	var pk nostr.PubKey
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		pk[8], pk[9] = byte(i), byte(i>>8)
		hllAdd(&reg, 8, &pk)
	}
}

func FuzzHLLOffset(f *testing.F) {
	for _, s := range []string{"", "hello", strings.Repeat("a", 64), "30023:" + strings.Repeat("b", 64) + ":d", "1:x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if off := hllOffset(v); off < 8 || off > 23 {
			t.Fatalf("hllOffset(%q) = %d, outside 8..23", v, off)
		}
	})
}
