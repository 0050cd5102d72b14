package postgres

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// The byte encodings of tag values and address d parts, as the tags,
// events and deleted_addrs tables hold them (docs/storage.md,
// "PostgreSQL backend"). Long values are hashed so that every key fits a
// btree entry; SHA-256 is treated as exact, as event ids are.

// Tag value encodings (the byte after the tag name in a tag key).
const (
	tagHex32  = 0x01 // 64 lowercase hex characters, stored as 32 raw bytes
	tagInline = 0x02 // the value's bytes, for values up to maxInline bytes
	tagHashed = 0x03 // sha256(value), for longer values
)

// d encodings (the first byte of dkey).
const (
	dInline = 0x00 // the d bytes follow
	dHashed = 0x01 // sha256(d) follows, for d longer than maxInline bytes
)

// maxInline is the longest tag value or d stored as is.
const maxInline = 256

// tagKey returns the key of tag value v of the single-letter tag name.
func tagKey(name byte, v string) []byte {
	if b, ok := nostr.ParseHex32(v); ok {
		k := make([]byte, 0, 34)
		return append(append(k, name, tagHex32), b[:]...)
	}
	if len(v) <= maxInline {
		k := make([]byte, 0, 2+len(v))
		return append(append(k, name, tagInline), v...)
	}
	h := sha256.Sum256([]byte(v))
	k := make([]byte, 0, 34)
	return append(append(k, name, tagHashed), h[:]...)
}

// pubkeyTagKey is tagKey('p', pk.Hex()).
func pubkeyTagKey(pk *nostr.PubKey) []byte {
	k := make([]byte, 0, 34)
	return append(append(k, 'p', tagHex32), pk[:]...)
}

// eventTagKeys returns the distinct tag keys of ev's single-letter tags
// with a value (the tags NIP-01 filters match).
func eventTagKeys(ev *nostr.Event) [][]byte {
	var out [][]byte
	for _, t := range ev.Tags {
		if len(t) < 2 || len(t[0]) != 1 {
			continue
		}
		k := tagKey(t[0][0], t[1])
		dup := false
		for _, have := range out {
			if string(have) == string(k) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, k)
		}
	}
	if out == nil {
		out = [][]byte{}
	}
	return out
}

// dKey returns the stored form of an address's d part.
func dKey(d string) []byte {
	if len(d) <= maxInline {
		k := make([]byte, 0, 1+len(d))
		return append(append(k, dInline), d...)
	}
	h := sha256.Sum256([]byte(d))
	return append([]byte{dHashed}, h[:]...)
}

// addrID names an address in maps: pubkey, kind and dkey.
type addrID string

func makeAddrID(pk []byte, kind int, dkey []byte) addrID {
	b := make([]byte, 0, 32+4+len(dkey))
	b = append(b, pk...)
	b = binary.BigEndian.AppendUint32(b, uint32(kind))
	return addrID(append(b, dkey...))
}

// authorLockClass is the first key of the writer's author locks
// (pg_advisory_xact_lock(int4, int4)); petrel_lock_authors has it too.
const authorLockClass = 0x70657472 // "petr", 1885697138

// authorLock returns the second key of pk's author lock: its first four
// bytes. Authors that share them share a lock, which only serializes
// their writes.
func authorLock(pk *nostr.PubKey) int32 { return int32(binary.BigEndian.Uint32(pk[:4])) }
