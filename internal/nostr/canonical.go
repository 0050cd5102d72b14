package nostr

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"sync"
)

// AppendCanonical appends the NIP-01 canonical serialization of ev,
// [0,<pubkey>,<created_at>,<kind>,<tags>,<content>], to dst and returns the
// extended slice. Strings are escaped by AppendString, whatever escaping
// they arrived with, so the result depends only on the event's fields.
func AppendCanonical(dst []byte, ev *Event) []byte {
	dst = append(dst, `[0,"`...)
	dst = appendHex(dst, ev.PubKey[:])
	dst = append(dst, `",`...)
	dst = strconv.AppendInt(dst, ev.CreatedAt, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, ',')
	dst = appendTags(dst, ev.Tags)
	dst = append(dst, ',')
	dst = AppendString(dst, ev.Content)
	return append(dst, ']')
}

// appendTags appends tags as a JSON array of arrays of strings.
func appendTags(dst []byte, tags Tags) []byte {
	dst = append(dst, '[')
	for i, t := range tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, s := range t {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, s)
		}
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// appendHex appends b as lowercase hex.
func appendHex(dst, b []byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 2*len(b))[:n+2*len(b)]
	hex.Encode(dst[n:], b)
	return dst
}

// escapeTable maps each byte below 0x20 (and '"', '\\') to its short escape
// letter, or 0 when it is written as \u00XX.
var escapeTable = [256]byte{
	'\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't', '"': '"', '\\': '\\',
}

// plainString8 is plain8 without the non-ASCII test: bytes >= 0x80 are
// copied verbatim by AppendString.
func plainString8(w uint64) bool {
	ctl := (w - 0x20*lsb) &^ w
	q := w ^ ('"' * lsb)
	q = (q - lsb) &^ q
	bs := w ^ ('\\' * lsb)
	bs = (bs - lsb) &^ bs
	return (ctl|q|bs)&msb == 0
}

func load8s(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// AppendString appends s as a JSON string with the NIP-01 canonical
// escaping: \n \" \\ \r \t \b \f as two-character escapes, the other control
// characters (below 0x20) as \u00XX with lowercase hex (what JSON.stringify
// and most implementations write; NIP-01 does not name them), and every
// other byte verbatim. s is assumed to be valid UTF-8 (ParseEvent ensures
// it); invalid bytes are copied as they are.
func AppendString(dst []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	i := 0
	for i < len(s) {
		for i+8 <= len(s) && plainString8(load8s(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if e := escapeTable[c]; e != 0 {
			dst = append(dst, '\\', e)
		} else {
			dst = append(dst, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&15])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// idStackBuf is the canonical size ComputeID serializes on the stack;
// larger events use a pooled buffer.
const idStackBuf = 2048

var canonPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// ComputeID returns the SHA-256 of the event's canonical serialization: the
// id the event must carry. It does not allocate in the steady state.
func ComputeID(ev *Event) ID {
	if canonicalSizeHint(ev) <= idStackBuf {
		var buf [idStackBuf]byte
		return sha256.Sum256(AppendCanonical(buf[:0], ev))
	}
	bp := canonPool.Get().(*[]byte)
	b := AppendCanonical((*bp)[:0], ev)
	id := ID(sha256.Sum256(b))
	if cap(b) <= 4<<20 {
		*bp = b[:0]
		canonPool.Put(bp)
	}
	return id
}

// canonicalSizeHint estimates the canonical size of ev: exact when no string
// needs escaping. When Raw is set it is an upper bound for events parsed by
// ParseEvent or built by Serialize (their strings are escaped at least as
// long as the canonical form), so it is used first.
func canonicalSizeHint(ev *Event) int {
	if ev.Raw != nil {
		return len(ev.Raw)
	}
	n := 100 + len(ev.Content)
	for _, t := range ev.Tags {
		n += 3
		for _, s := range t {
			n += len(s) + 3
		}
	}
	return n
}

// CheckID reports whether ev.ID is the hash of the event's canonical
// serialization.
func CheckID(ev *Event) bool { return ComputeID(ev) == ev.ID }
