package pebble

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// encodeKey re-encodes a decoded key (the inverse of DecodeKey).
func encodeKey(ki *KeyInfo) []byte {
	k := []byte{ki.Table}
	tail := func() { k = appendTail(k, ki.CreatedAt, &ki.ID) }
	switch ki.Table {
	case pfxBody:
		k = appendBodyKey(k[:0], ki.Serial)
	case pfxID:
		k = append(k, ki.ID[:]...)
	case pfxCreated:
		tail()
	case pfxAuthor:
		k = append(k, ki.PubKey[:]...)
		tail()
	case pfxKind:
		k = appendU16(k, uint16(ki.Kind))
		tail()
	case pfxAuthKind:
		k = appendU16(append(k, ki.PubKey[:]...), uint16(ki.Kind))
		tail()
	case pfxTag:
		k = append(k, ki.TagName, ki.TagType)
		if ki.TagType == tagInline {
			k = append(k, byte(len(ki.TagValue)))
		}
		k = append(k, ki.TagValue...)
		tail()
	case pfxAddr, pfxDelAddr:
		k = appendU16(append(k, ki.PubKey[:]...), uint16(ki.Kind))
		k = append(append(k, ki.DType), ki.D...)
	case pfxExpiry:
		k = appendU64(appendU64(k, uint64(ki.Exp)), ki.Serial)
	case pfxDelID:
		k = append(append(k, ki.ID[:]...), ki.PubKey[:]...)
	case pfxVanish:
		k = append(k, ki.PubKey[:]...)
	case pfxHeld:
		k = append(append(k, ki.ID[:]...), ki.Sig[:]...)
	case pfxSearch:
		k = appendPostingKey(k[:0], ki.Term, ki.Serial)
	case pfxDoc:
		k = appendDocKey(k[:0], ki.Serial)
	case pfxSegment:
		k = appendSegmentKey(k[:0], ki.Serial)
	}
	return k
}

func FuzzDecodeKey(f *testing.F) {
	id := nostr.ID{1, 2, 3}
	pk := nostr.PubKey{9, 8, 7}
	f.Add([]byte{})
	f.Add(formatKey)
	f.Add(bodyKey(42))
	f.Add(idKey(&id))
	f.Add(appendTail([]byte{pfxCreated}, 1700000000, &id))
	f.Add(appendTail(append([]byte{pfxAuthor}, pk[:]...), 5, &id))
	f.Add(appendTail(appendU16([]byte{pfxKind}, 1), 5, &id))
	f.Add(appendTail(appendU16(append([]byte{pfxAuthKind}, pk[:]...), 30023), 5, &id))
	for _, v := range []string{"", "nostr", pk.Hex(), string(bytes.Repeat([]byte("x"), 300))} {
		p, _ := tagPrefix('t', v)
		f.Add(appendTail(p, 7, &id))
	}
	f.Add(addrKey(pfxAddr, &pk, 30023, "slug"))
	f.Add(addrKey(pfxDelAddr, &pk, 0, ""))
	f.Add(addrKey(pfxAddr, &pk, 30023, string(bytes.Repeat([]byte("d"), 300))))
	f.Add(expiryKey(1800000000, 3))
	f.Add(delIDKey(&id, &pk))
	f.Add(vanishKey(&pk))
	f.Add(heldKey(&id, &nostr.Sig{5, 6}))
	f.Add(appendPostingKey(nil, []byte("bitcoin"), 7))
	f.Add(appendPostingKey(nil, []byte("東京"), 1<<40))
	f.Add(appendPostingKey(nil, bytes.Repeat([]byte("x"), 128), 0))
	f.Add([]byte{pfxSearch, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(searchKey)
	f.Add(appendDocKey(nil, 12345))
	f.Add(appendSegmentKey(nil, 67890))
	f.Fuzz(func(t *testing.T, k []byte) {
		ki, err := DecodeKey(k)
		if err != nil || ki.Table == pfxMeta {
			return
		}
		if got := encodeKey(&ki); !bytes.Equal(got, k) {
			t.Fatalf("DecodeKey(%x) = %+v, re-encodes to %x", k, ki, got)
		}
	})
}

func FuzzTagKey(f *testing.F) {
	f.Add(byte('p'), nostr.PubKey{1}.Hex(), int64(1700000000), []byte{1, 2})
	f.Add(byte('t'), "nostr", int64(0), []byte{})
	f.Add(byte('r'), string(bytes.Repeat([]byte("long"), 40)), int64(nostr.MaxTimestamp), []byte{0xff})
	f.Add(byte('e'), "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789", int64(5), []byte{})
	f.Fuzz(func(t *testing.T, name byte, value string, ts int64, idb []byte) {
		if ts < 0 {
			ts = -ts
		}
		if ts < 0 {
			return
		}
		var id nostr.ID
		copy(id[:], idb)
		p, exact := tagPrefix(name, value)
		k := appendTail(p, ts, &id)
		ki, err := DecodeKey(k)
		if err != nil {
			t.Fatalf("DecodeKey(tag key of %q): %v", value, err)
		}
		if ki.TagName != name || ki.CreatedAt != ts || ki.ID != id {
			t.Fatalf("decoded %+v", ki)
		}
		switch ki.TagType {
		case tagHex32:
			if !exact || hex.EncodeToString(ki.TagValue) != value {
				t.Fatalf("hex value %q decoded as %x", value, ki.TagValue)
			}
		case tagInline:
			if !exact || string(ki.TagValue) != value {
				t.Fatalf("inline value %q decoded as %q", value, ki.TagValue)
			}
		case tagHashed:
			h := sha256.Sum256([]byte(value))
			if exact || len(value) <= maxInlineTag || !bytes.Equal(ki.TagValue, h[:hashedTagLen]) {
				t.Fatalf("hashed value %q decoded as %x", value, ki.TagValue)
			}
		default:
			t.Fatalf("tag type %d", ki.TagType)
		}
		// Distinct values have distinct prefixes, and no prefix is a
		// prefix of another value's key (streams never overlap).
		other, _ := tagPrefix(name, value+"x")
		if bytes.HasPrefix(appendTail(other, ts, &id), p) {
			t.Fatalf("prefix of %q is a prefix of the key of %q", value, value+"x")
		}
	})
}

func FuzzMeta(f *testing.F) {
	f.Add(uint64(1), uint16(1), []byte{1, 2, 3, 4, 5, 6, 7, 8}, false, int64(0), []byte{})
	f.Add(uint64(1<<40), uint16(30023), []byte{}, true, int64(1800000000), []byte{0, 1})
	f.Fuzz(func(t *testing.T, serial uint64, kind uint16, pk8 []byte, hasExp bool, exp int64, junk []byte) {
		if exp < 0 {
			exp = 0
		}
		m := meta{serial: serial, kind: kind, hasExp: hasExp}
		copy(m.pk8[:], pk8)
		if hasExp {
			m.exp = exp
		}
		got, ok := decodeMeta(appendMeta(nil, &m))
		if !ok || got != m {
			t.Fatalf("meta %+v round-trips to %+v, %v", m, got, ok)
		}
		decodeMeta(junk)
		decodeIDValue(junk)
		decodeAddrValue(junk)
		decodeBody(junk)
		decodeTS(junk)
	})
}

func TestKeyOrder(t *testing.T) {
	// Ascending keys are newest first, ties by id ascending.
	a, b := nostr.ID{1}, nostr.ID{2}
	f := func(ts1 int64, id1 nostr.ID, ts2 int64, id2 nostr.ID) {
		t.Helper()
		k1 := appendTail([]byte{pfxCreated}, ts1, &id1)
		k2 := appendTail([]byte{pfxCreated}, ts2, &id2)
		if bytes.Compare(k1, k2) >= 0 {
			t.Fatalf("key(%d, %x) >= key(%d, %x)", ts1, id1[0], ts2, id2[0])
		}
	}
	f(10, b, 9, a)
	f(10, a, 10, b)
	f(nostr.MaxTimestamp, b, 0, a)
	f(1, a, 0, a)
	if got := prefixEnd([]byte{1, 0xff}); !bytes.Equal(got, []byte{2}) {
		t.Fatalf("prefixEnd = %x", got)
	}
	if got := prefixEnd([]byte{0xff, 0xff}); got != nil {
		t.Fatalf("prefixEnd(ffff) = %x", got)
	}
}

// FuzzPostingBlock reads arbitrary bytes as a posting block (it must
// never panic, and a block it accepts re-encodes to the same postings),
// and round-trips a block built from the input.
func FuzzPostingBlock(f *testing.F) {
	p := posting{freq: 1, kind: 1, docLen: 30}
	f.Add(uint64(7), appendBlock(nil, []blockPosting{{7, p}}))
	f.Add(uint64(3), appendBlock(nil, []blockPosting{{1 << 40, posting{freq: 255, kind: 30023, docLen: 1 << 20}}, {9, p}, {3, p}}))
	f.Add(uint64(0), []byte{2, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1})
	f.Add(^uint64(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, minSerial uint64, v []byte) {
		var r blockReader
		var got []blockPosting
		if r.reset(minSerial, v) {
			for {
				ok, err := r.next()
				if err != nil {
					if !errors.Is(err, errCorrupt) {
						t.Fatalf("error %v is not errCorrupt", err)
					}
					got = nil
					break
				}
				if !ok {
					break
				}
				got = append(got, blockPosting{r.serial, r.p})
			}
		}
		if len(got) > 0 {
			var r2 blockReader
			if !r2.reset(minSerial, appendBlock(nil, got)) {
				t.Fatalf("re-encoding of %+v does not decode", got)
			}
			for i := range got {
				if ok, err := r2.next(); !ok || err != nil || r2.serial != got[i].serial || r2.p != got[i].p {
					t.Fatalf("posting %d of %+v re-reads as %d %+v (%v %v)", i, got, r2.serial, r2.p, ok, err)
				}
			}
		}
		// A block built from the input round-trips.
		var ps []blockPosting
		serial := minSerial >> 1 // no overflow below
		for i := 0; i+4 <= len(v) && len(ps) < maxBlockPostings; i += 4 {
			serial += uint64(v[i]) + 1
			ps = append(ps, blockPosting{serial, posting{freq: max(v[i+1], 1), kind: uint16(v[i+2]) << 8, docLen: uint64(v[i+3]) << 20}})
		}
		if len(ps) == 0 {
			return
		}
		slices.Reverse(ps)
		b := appendBlock(nil, ps)
		var r3 blockReader
		if !r3.reset(ps[len(ps)-1].serial, b) {
			t.Fatalf("block of %+v does not decode", ps)
		}
		for i := range ps {
			if ok, err := r3.next(); !ok || err != nil || r3.serial != ps[i].serial || r3.p != ps[i].p {
				t.Fatalf("posting %d of %+v reads as %d %+v (%v %v)", i, ps, r3.serial, r3.p, ok, err)
			}
		}
		if ok, err := r3.next(); ok || err != nil {
			t.Fatalf("more than %d postings: %v %v", len(ps), ok, err)
		}
	})
}
