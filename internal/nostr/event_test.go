package nostr

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseHex32(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	b, ok := ParseHex32(id)
	if !ok || hex.EncodeToString(b[:]) != id {
		t.Fatalf("ParseHex32(%q) = %x, %v", id, b, ok)
	}
	for _, s := range []string{id[:63], id + "0", strings.ToUpper(id), id[:63] + "g", ""} {
		if _, ok := ParseHex32(s); ok {
			t.Errorf("ParseHex32(%q) accepted", s)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ParseHex32("not hex") }); n != 0 {
		t.Errorf("ParseHex32 of a non-hex value allocates %v times", n)
	}
}
