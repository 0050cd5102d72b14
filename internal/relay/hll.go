package relay

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// NIP-45 HyperLogLog. A relay answers a COUNT with 256 one-byte registers
// filled from the pubkeys of the counted events, so that a client can
// merge the answers of several relays (register by register, taking the
// largest) and estimate how many distinct authors matched overall.

// hllRegisters is the number of registers of a NIP-45 HLL value.
const hllRegisters = 256

// hllFilter reports whether a COUNT's filters qualify for an "hll" field,
// and with which offset. NIP-45 derives the offset from the first value of
// the filter's first tag condition; petrel's parser keeps tag conditions
// sorted by name, not in the order the client wrote them, so a filter
// qualifies only when that choice is unambiguous: exactly one filter with
// exactly one tag condition (every common NIP-45 filter, such as
// {"#e":[<id>],"kinds":[7]} or {"#p":[<pubkey>],"kinds":[3]}), and no
// search.
func hllFilter(filters []nostr.Filter) (offset int, ok bool) {
	if len(filters) != 1 {
		return 0, false
	}
	f := &filters[0]
	if len(f.Tags) != 1 || len(f.Tags[0].Values) == 0 || f.Search != "" || f.Empty() {
		return 0, false
	}
	return hllOffset(f.Tags[0].Values[0]), true
}

// hllOffset returns the NIP-45 offset for a tag value v: take a 64-char
// hex string (v itself if it is a hex event id or pubkey, the pubkey of a
// "kind:pubkey:d" address, else the hex SHA-256 of v), read its character
// at position 32 as a base-16 digit and add 8. The result is in 8..23.
func hllOffset(v string) int {
	h := v
	if _, ok := nostr.ParseHex32(v); !ok {
		if a, ok := nostr.ParseAddress(v); ok {
			h = a.PubKey.Hex()
		} else {
			sum := sha256.Sum256([]byte(v))
			h = hex.EncodeToString(sum[:])
		}
	}
	c := h[32]
	if c <= '9' {
		return int(c-'0') + 8
	}
	return int(c-'a') + 10 + 8
}

// hllAdd adds an event by pk to the registers: the byte of pk at offset
// selects the register; the value is the number of leading zero bits of
// the next 7 bytes (56 bits), plus one; a register keeps its largest
// value. offset must be in 0..24.
func hllAdd(reg *[hllRegisters]uint8, offset int, pk *nostr.PubKey) {
	w := binary.BigEndian.Uint64(pk[offset : offset+8])
	j := uint8(w >> 56)
	z := bits.LeadingZeros64(w << 8)
	if z > 56 {
		z = 56
	}
	if v := uint8(z + 1); v > reg[j] {
		reg[j] = v
	}
}
