package pebble

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
)

// Key prefixes: the first byte of every key names its table. The layouts
// are documented (with byte diagrams) in docs/storage.md; keep both in step.
const (
	pfxMeta     = 0x00 // 0x00 name -> value: store-level metadata (format version)
	pfxBody     = 'E'  // E ^serial(8) -> pubkey(32) raw
	pfxID       = 'I'  // I id(32) -> created_at(8) meta
	pfxCreated  = 'C'  // C inv(8) id(32) -> meta
	pfxAuthor   = 'P'  // P pubkey(32) inv(8) id(32) -> meta
	pfxKind     = 'K'  // K kind(2) inv(8) id(32) -> meta
	pfxAuthKind = 'Q'  // Q pubkey(32) kind(2) inv(8) id(32) -> meta
	pfxTag      = 'T'  // T name(1) tagvalue inv(8) id(32) -> meta
	pfxAddr     = 'A'  // A address -> created_at(8) id(32) meta
	pfxExpiry   = 'X'  // X expiration(8) serial(8) -> id(32)
	pfxDelID    = 'D'  // D id(32) deleter(32) -> (empty)
	pfxDelAddr  = 'R'  // R address -> created_at(8)
	pfxVanish   = 'W'  // W pubkey(32) -> created_at(8)
	pfxSearch   = 'S'  // S len(1) term ^minSerial(8) -> posting block: count(uvarint) postings, newest first
	pfxDoc      = 'F'  // F ^serial(8) -> id(32) created_at(8) meta: searchable events
	pfxHeld     = 'U'  // U id(32) sig(64) -> raw: events held unverified (store.Unverified)
	pfxSegment  = 'G'  // G ^minSerial(8) -> posting segment: one write batch's posting blocks, every term, not yet folded into S
)

// tables are the key prefixes above: every key the store writes starts
// with one of them (TestKeyspace checks it against a store that has used
// every table).
var tables = []byte{pfxMeta, pfxBody, pfxID, pfxCreated, pfxAuthor, pfxKind, pfxAuthKind, pfxTag,
	pfxAddr, pfxExpiry, pfxDelID, pfxDelAddr, pfxVanish, pfxSearch, pfxDoc, pfxHeld, pfxSegment}

// keyspace returns the range [start, end) that holds every key of every
// table, and so every key the store writes (and their tombstones).
func keyspace() (start, end []byte) {
	return []byte{slices.Min(tables)}, prefixEnd([]byte{slices.Max(tables)})
}

// formatKey holds the on-disk format version; formatVersion is what this
// code writes and reads. A database in formatV2 (the same layout with the
// commit state in three keys: commitKey holding the position alone,
// eventCountKey and searchStatsKey) or formatV1 (formatV2 without the
// search tables) is upgraded at Open (Store.upgradeMeta, then
// Store.openSearch builds the index); a read-only open reads a formatV2
// database as it is.
var formatKey = []byte("\x00format")

const (
	formatVersion = "petrel-pebble/3"
	formatV2      = "petrel-pebble/2"
	formatV1      = "petrel-pebble/1"
)

// searchKey holds searchIndexVersion, the version of the search index (S
// and F keys) in the database; it is absent when there is no index
// (Options.DisableSearch, or an index being built). The collection
// figures BM25 needs are in the commit state (commitKey); searchStatsKey
// held them in formatV2: documents(8) total length(8).
// searchSerialKey, when present, holds a serial(8) below which S keys may
// hold postings of removed events: the writer never allocates a serial
// below it (see writer.index).
var (
	searchKey       = []byte("\x00search")
	searchStatsKey  = []byte("\x00searchstats")
	searchSerialKey = []byte("\x00searchserial")
	// searchDeadKey, when present, holds the number(8) of postings of
	// removed events left in S blocks (cleared by a rebuild).
	searchDeadKey = []byte("\x00searchdead")
	// searchFoldKey, when present, marks a fold written over several
	// batches (segments.go): floor(8) last(8), the keys (oldest serials)
	// of the first and last segment it folds. S blocks whose oldest
	// serial is at or above floor are that fold's, written so far: no
	// reader counts them until the batch that deletes this key and those
	// segments.
	searchFoldKey = []byte("\x00searchfold")
)

// searchIndexVersion names the analyzer (search.Version) and the layout
// of the S and G keys ("blocks3": posting blocks per term, and posting
// segments, one per write batch, folded into blocks by later batches,
// searchFoldKey marking a fold not yet complete). Open rebuilds an index
// stored under any other value, except searchIndexV1 ("blocks1": the
// same S blocks, no segments) and searchIndexV2 ("blocks2": segments
// folded by one batch, never a searchFoldKey), which are upgraded in
// place (see Store.openSearch). An older build rebuilds a blocks3 index
// rather than read a fold it does not know.
const (
	searchIndexVersion = search.Version + "+blocks3"
	searchIndexV2      = search.Version + "+blocks2"
	searchIndexV1      = search.Version + "+blocks1"
)

// commitKey holds the commit state (commitState): the commit position(8)
// of the last commit that stored events (store.SaveResult.Seq), the
// number(8) of stored events (store.Stats.Events), and the search
// collection figures documents(8) total length(8) (zero without a search
// index). The writer rewrites it in every batch that stores or removes
// events or changes the figures, so a query reads, from its own snapshot,
// exactly the last commit it sees (store.Snapshot) and the figures of
// that commit. It is one key, not three, because a memtable holds a
// version of it per commit and a flush steps over every version before it
// writes its first block (docs/storage.md, "The commit state").
//
// In formatV2 it held the position(8) alone; eventCountKey held the
// number(8) of stored events and the position(8) it was written at (a
// build without it that stored events since left another position than
// commitKey's: the I keys are counted when the database is upgraded), and
// searchStatsKey the figures.
var (
	commitKey     = []byte("\x00commit")
	eventCountKey = []byte("\x00eventcount")
)

// commitState is commitKey's value.
type commitState struct {
	pos    uint64       // the last commit that stored events
	events uint64       // stored events
	search search.Stats // search collection figures; zero without an index
}

const commitStateLen = 32

func appendCommitState(dst []byte, c commitState) []byte {
	return appendSearchStats(appendU64(appendU64(dst, c.pos), c.events), c.search)
}

// readCommit reads the commit state from r (the database or a snapshot).
// full is false when the key is absent (the zero state) or in formatV2's
// layout (the position alone, read into c.pos).
func readCommit(r pebble.Reader) (c commitState, full bool, err error) {
	v, found, err := getValue(r, commitKey)
	switch {
	case err != nil || !found:
		return c, false, err
	case len(v) == 8:
		c.pos = binary.BigEndian.Uint64(v)
		return c, false, nil
	case len(v) == commitStateLen:
		c.pos, c.events = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
		var ok bool
		if c.search, ok = decodeSearchStats(v[16:]); ok && int64(c.events) >= 0 {
			return c, true, nil
		}
	}
	return commitState{}, false, fmt.Errorf("%w: commit state %x", errCorrupt, v)
}

// Tag value encodings (the byte after the tag name in T keys).
const (
	tagHex32  = 0x01 // 64 lowercase hex characters stored as 32 raw bytes
	tagInline = 0x02 // len(1) bytes, for values up to maxInlineTag bytes
	tagHashed = 0x03 // sha256(value)[:16], for longer values (not exact)
)

// maxInlineTag is the longest tag value stored inline in a T key.
const maxInlineTag = 128

// hashedTagLen is the length of a hashed tag value.
const hashedTagLen = 16

// d encodings in addresses (A and R keys).
const (
	dInline = 0x00 // d bytes follow, up to maxInlineD
	dHashed = 0x01 // sha256(d), for longer d values
)

// maxInlineD is the longest d value stored inline in an address key.
const maxInlineD = 200

// tailLen is the length of the inv(8) id(32) tail of every stream key.
const tailLen = 40

// errCorrupt reports a key or value that does not decode.
var errCorrupt = errors.New("store/pebble: corrupt key or value")

// inv maps created_at to its key form: big-endian bitwise NOT, so that
// ascending keys are descending timestamps.
func inv(ts int64) uint64 { return ^uint64(ts) }

func appendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

func appendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }

// appendTagValue appends the key form of a tag value, and reports whether
// the form is exact (hashed values may collide, so matches found through
// them must be checked against the event).
func appendTagValue(dst []byte, v string) ([]byte, bool) {
	if b, ok := nostr.ParseHex32(v); ok {
		return append(append(dst, tagHex32), b[:]...), true
	}
	switch {
	case len(v) <= maxInlineTag:
		dst = append(dst, tagInline, byte(len(v)))
		return append(dst, v...), true
	default:
		h := sha256.Sum256([]byte(v))
		dst = append(dst, tagHashed)
		return append(dst, h[:hashedTagLen]...), false
	}
}

// tagPrefix returns T name tagvalue: the prefix of one tag value's stream.
func tagPrefix(name byte, value string) ([]byte, bool) {
	k := make([]byte, 0, 2+2+maxInlineTag+tailLen)
	k = append(k, pfxTag, name)
	return appendTagValue(k, value)
}

// appendAddress appends pubkey(32) kind(2) dtype(1) d.
func appendAddress(dst []byte, pk *nostr.PubKey, kind int, d string) []byte {
	dst = append(dst, pk[:]...)
	dst = appendU16(dst, uint16(kind))
	if len(d) > maxInlineD {
		h := sha256.Sum256([]byte(d))
		dst = append(dst, dHashed)
		return append(dst, h[:]...)
	}
	dst = append(dst, dInline)
	return append(dst, d...)
}

func addrKey(pfx byte, pk *nostr.PubKey, kind int, d string) []byte {
	k := make([]byte, 0, 1+32+2+1+len(d))
	return appendAddress(append(k, pfx), pk, kind, d)
}

// bodyKey is E ^serial: later serials sort first, so that reading the
// bodies of a newest-first result moves forward through the key space
// (pebble turns forward seeks into cheap nexts, and the bodies of recent
// events sit together).
func bodyKey(serial uint64) []byte { return appendBodyKey(make([]byte, 0, 9), serial) }

func appendBodyKey(dst []byte, serial uint64) []byte { return appendU64(append(dst, pfxBody), ^serial) }

func idKey(id *nostr.ID) []byte {
	k := make([]byte, 0, 33)
	return append(append(k, pfxID), id[:]...)
}

func delIDKey(id *nostr.ID, deleter *nostr.PubKey) []byte {
	k := make([]byte, 0, 65)
	k = append(append(k, pfxDelID), id[:]...)
	return append(k, deleter[:]...)
}

// heldKey is the key of an event held unverified: U id(32) sig(64).
func heldKey(id *nostr.ID, sig *nostr.Sig) []byte {
	return append(append(append(make([]byte, 0, 97), pfxHeld), id[:]...), sig[:]...)
}

func vanishKey(pk *nostr.PubKey) []byte {
	k := make([]byte, 0, 33)
	return append(append(k, pfxVanish), pk[:]...)
}

func expiryKey(exp int64, serial uint64) []byte {
	k := make([]byte, 0, 17)
	return appendU64(appendU64(append(k, pfxExpiry), uint64(exp)), serial)
}

// appendTail appends inv(created_at) id.
func appendTail(dst []byte, createdAt int64, id *nostr.ID) []byte {
	return append(appendU64(dst, inv(createdAt)), id[:]...)
}

// decodeTail reads created_at and id from the last tailLen bytes of a
// stream key.
func decodeTail(k []byte) (createdAt int64, id nostr.ID, ok bool) {
	if len(k) < tailLen {
		return 0, id, false
	}
	t := k[len(k)-tailLen:]
	createdAt = int64(^binary.BigEndian.Uint64(t))
	copy(id[:], t[8:])
	return createdAt, id, createdAt >= 0
}

// prefixEnd returns the smallest key greater than every key starting with
// p, or nil if there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// meta is the small per-event summary stored as (the end of) every index
// value, so that planner post-filters and expiration checks need not load
// the event body.
type meta struct {
	serial uint64
	kind   uint16
	pk8    [8]byte // first 8 bytes of the author's pubkey
	hasExp bool
	exp    int64 // NIP-40 expiration, when hasExp
}

const (
	metaLen     = 8 + 2 + 8 + 1 // without the expiration
	metaFlagExp = 0x01
)

func appendMeta(dst []byte, m *meta) []byte {
	dst = appendU64(dst, m.serial)
	dst = appendU16(dst, m.kind)
	dst = append(dst, m.pk8[:]...)
	if m.hasExp {
		dst = append(dst, metaFlagExp)
		return appendU64(dst, uint64(m.exp))
	}
	return append(dst, 0)
}

func decodeMeta(b []byte) (meta, bool) {
	var m meta
	if len(b) < metaLen {
		return m, false
	}
	m.serial = binary.BigEndian.Uint64(b)
	m.kind = binary.BigEndian.Uint16(b[8:])
	copy(m.pk8[:], b[10:18])
	switch b[18] {
	case 0:
		return m, len(b) == metaLen
	case metaFlagExp:
		if len(b) != metaLen+8 {
			return m, false
		}
		m.hasExp = true
		m.exp = int64(binary.BigEndian.Uint64(b[metaLen:]))
		return m, m.exp >= 0
	}
	return m, false
}

// expired reports whether the event has expired at now.
func (m *meta) expired(now int64) bool { return m.hasExp && m.exp <= now }

// idValue is the value of an I key: created_at(8) meta.
func appendIDValue(dst []byte, createdAt int64, m *meta) []byte {
	return appendMeta(appendU64(dst, uint64(createdAt)), m)
}

func decodeIDValue(b []byte) (int64, meta, bool) {
	if len(b) < 8 {
		return 0, meta{}, false
	}
	ts := int64(binary.BigEndian.Uint64(b))
	m, ok := decodeMeta(b[8:])
	return ts, m, ok && ts >= 0
}

// addrValue is the value of an A key: created_at(8) id(32) meta.
func appendAddrValue(dst []byte, createdAt int64, id *nostr.ID, m *meta) []byte {
	dst = appendU64(dst, uint64(createdAt))
	dst = append(dst, id[:]...)
	return appendMeta(dst, m)
}

func decodeAddrValue(b []byte) (int64, nostr.ID, meta, bool) {
	var id nostr.ID
	if len(b) < 40 {
		return 0, id, meta{}, false
	}
	ts := int64(binary.BigEndian.Uint64(b))
	copy(id[:], b[8:40])
	m, ok := decodeMeta(b[40:])
	return ts, id, m, ok && ts >= 0
}

// decodeTS decodes an 8-byte created_at value (R and W keys).
func decodeTS(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	v := int64(binary.BigEndian.Uint64(b))
	return v, v >= 0
}

func decodeBody(b []byte) (nostr.PubKey, []byte, bool) {
	var pk nostr.PubKey
	if len(b) < 32 {
		return pk, nil, false
	}
	copy(pk[:], b)
	return pk, b[32:], true
}

// KeyInfo is a decoded key, for the fuzz targets and the scan tooling.
type KeyInfo struct {
	Table     byte   // the prefix byte
	Serial    uint64 // for S and G keys, the oldest serial of the posting block or segment
	ID        nostr.ID
	PubKey    nostr.PubKey
	CreatedAt int64
	Kind      int
	Term      []byte // search term (S keys)
	TagName   byte
	TagType   byte
	TagValue  []byte // inline bytes, 32 raw bytes or the 16-byte hash
	DType     byte
	D         []byte
	Exp       int64
	Sig       nostr.Sig // U keys
}

// DecodeKey decodes any key of the store. It never panics; malformed keys
// return errCorrupt.
func DecodeKey(k []byte) (KeyInfo, error) {
	var ki KeyInfo
	bad := fmt.Errorf("%w: key %x", errCorrupt, k)
	if len(k) == 0 {
		return ki, bad
	}
	ki.Table = k[0]
	b := k[1:]
	tail := func(rest []byte) error {
		if len(rest) != tailLen {
			return bad
		}
		var ok bool
		ki.CreatedAt, ki.ID, ok = decodeTail(rest)
		if !ok {
			return bad
		}
		return nil
	}
	addr := func(rest []byte) error {
		if len(rest) < 35 {
			return bad
		}
		copy(ki.PubKey[:], rest)
		ki.Kind = int(binary.BigEndian.Uint16(rest[32:]))
		ki.DType = rest[34]
		ki.D = rest[35:]
		switch ki.DType {
		case dInline:
			if len(ki.D) > maxInlineD {
				return bad
			}
		case dHashed:
			if len(ki.D) != 32 {
				return bad
			}
		default:
			return bad
		}
		return nil
	}
	var err error
	switch ki.Table {
	case pfxMeta:
		return ki, nil
	case pfxBody:
		if len(b) != 8 {
			return ki, bad
		}
		ki.Serial = ^binary.BigEndian.Uint64(b)
	case pfxID:
		if len(b) != 32 {
			return ki, bad
		}
		copy(ki.ID[:], b)
	case pfxCreated:
		err = tail(b)
	case pfxAuthor:
		if len(b) < 32 {
			return ki, bad
		}
		copy(ki.PubKey[:], b)
		err = tail(b[32:])
	case pfxKind:
		if len(b) < 2 {
			return ki, bad
		}
		ki.Kind = int(binary.BigEndian.Uint16(b))
		err = tail(b[2:])
	case pfxAuthKind:
		if len(b) < 34 {
			return ki, bad
		}
		copy(ki.PubKey[:], b)
		ki.Kind = int(binary.BigEndian.Uint16(b[32:]))
		err = tail(b[34:])
	case pfxTag:
		if len(b) < 2 {
			return ki, bad
		}
		ki.TagName, ki.TagType = b[0], b[1]
		b = b[2:]
		n := 0
		switch ki.TagType {
		case tagHex32:
			n = 32
		case tagHashed:
			n = hashedTagLen
		case tagInline:
			if len(b) < 1 || int(b[0]) > maxInlineTag {
				return ki, bad
			}
			n = int(b[0])
			b = b[1:]
		default:
			return ki, bad
		}
		if len(b) < n {
			return ki, bad
		}
		ki.TagValue = b[:n]
		err = tail(b[n:])
	case pfxAddr, pfxDelAddr:
		err = addr(b)
	case pfxExpiry:
		if len(b) != 16 {
			return ki, bad
		}
		ki.Exp = int64(binary.BigEndian.Uint64(b))
		ki.Serial = binary.BigEndian.Uint64(b[8:])
	case pfxDelID:
		if len(b) != 64 {
			return ki, bad
		}
		copy(ki.ID[:], b)
		copy(ki.PubKey[:], b[32:])
	case pfxVanish:
		if len(b) != 32 {
			return ki, bad
		}
		copy(ki.PubKey[:], b)
	case pfxDoc, pfxSegment:
		if len(b) != 8 {
			return ki, bad
		}
		ki.Serial = ^binary.BigEndian.Uint64(b)
	case pfxHeld:
		if len(b) != 96 {
			return ki, bad
		}
		copy(ki.ID[:], b)
		copy(ki.Sig[:], b[32:])
	case pfxSearch:
		if len(b) < 1 || int(b[0]) == 0 || int(b[0]) > search.MaxTermLen || len(b) != 1+int(b[0])+8 {
			return ki, bad
		}
		ki.Term = b[1 : 1+b[0]]
		ki.Serial = ^binary.BigEndian.Uint64(b[1+b[0]:])
	default:
		return ki, bad
	}
	return ki, err
}

// appendSearchPrefix appends S len(1) term: the prefix of one term's
// posting list. term is at most search.MaxTermLen bytes.
func appendSearchPrefix[T string | []byte](dst []byte, term T) []byte {
	return append(append(dst, pfxSearch, byte(len(term))), term...)
}

// appendPostingKey appends S len(1) term ^minSerial: the key of a posting
// block whose oldest posting has serial minSerial. The blocks of one term
// cover disjoint serial ranges, so the keys order them newest first, and
// SeekGE(S len term ^serial) lands on the block that holds serial (or on
// the newest block older than it).
func appendPostingKey[T string | []byte](dst []byte, term T, minSerial uint64) []byte {
	return appendU64(appendSearchPrefix(dst, term), ^minSerial)
}

// posting is one document in a term's posting list: the term's weighted
// frequency in the document, the event's kind (so that a kinds condition
// is checked while scoring), and the document's length (so that scoring
// reads nothing but the posting list).
type posting struct {
	freq   uint8
	kind   uint16
	docLen uint64
}

// appendPosting appends freq(1) kind(2) doclen(uvarint).
func appendPosting(dst []byte, p posting) []byte {
	dst = append(dst, p.freq)
	dst = appendU16(dst, p.kind)
	return binary.AppendUvarint(dst, p.docLen)
}

// decodePostingPrefix decodes the posting at the start of b and returns
// its length in bytes.
func decodePostingPrefix(b []byte) (posting, int, bool) {
	if len(b) < 4 {
		return posting{}, 0, false
	}
	p := posting{freq: b[0], kind: binary.BigEndian.Uint16(b[1:])}
	docLen, n := binary.Uvarint(b[3:])
	p.docLen = docLen
	return p, 3 + n, n > 0 && p.freq > 0
}

// maxBlockPostings is the most postings the writer puts in one block: a
// term found in more events of one batch gets several blocks. It bounds
// what a seek into a block decodes.
const maxBlockPostings = 256

// blockPosting is a posting and the serial of its document.
type blockPosting struct {
	serial uint64
	p      posting
}

// appendBlock appends the value of a posting block: count(uvarint), then
// the postings newest first, each delta(uvarint) freq(1) kind(2)
// doclen(uvarint). The first delta is the posting's serial minus the
// block's oldest serial (the key's), each other one the previous
// posting's serial minus this one's (at least 1). ps must be non-empty
// and strictly newest first.
func appendBlock(dst []byte, ps []blockPosting) []byte {
	minSerial := ps[len(ps)-1].serial
	dst = binary.AppendUvarint(dst, uint64(len(ps)))
	prev := minSerial
	for i := range ps {
		d := ps[i].serial - prev
		if i > 0 {
			d = prev - ps[i].serial
		}
		prev = ps[i].serial
		dst = binary.AppendUvarint(dst, d)
		dst = appendPosting(dst, ps[i].p)
	}
	return dst
}

// errBadBlock reports a posting block that does not decode (wrapped with
// its key by the reader's callers).
var errBadBlock = fmt.Errorf("%w: posting block", errCorrupt)

// blockReader reads the postings of one block in order, newest first,
// without copying it. It checks the block as it goes: a block that does
// not decode makes next return errBadBlock, never a panic.
type blockReader struct {
	b      []byte // what is left of the value
	min    uint64 // the block's oldest serial (from the key)
	left   int    // postings not read yet
	first  bool   // no posting read yet
	serial uint64 // serial of the posting last read
	p      posting
}

// reset starts reading the block value v, whose key names minSerial. It
// reports false when the header does not decode.
func (r *blockReader) reset(minSerial uint64, v []byte) bool {
	n, k := binary.Uvarint(v)
	// Every posting takes at least 5 bytes.
	if k <= 0 || n == 0 || n > uint64(len(v)-k)/5 {
		*r = blockReader{}
		return false
	}
	*r = blockReader{b: v[k:], min: minSerial, left: int(n), first: true}
	return true
}

// next reads the next posting into serial and p; it reports false at the
// end of the block.
func (r *blockReader) next() (bool, error) {
	if r.left == 0 {
		return false, nil
	}
	d, k := binary.Uvarint(r.b)
	if k <= 0 {
		return false, errBadBlock
	}
	var s uint64
	if r.first {
		s = r.min + d
		if s < r.min {
			return false, errBadBlock
		}
	} else {
		if d == 0 || d > r.serial-r.min {
			return false, errBadBlock
		}
		s = r.serial - d
	}
	p, n, ok := decodePostingPrefix(r.b[k:])
	if !ok {
		return false, errBadBlock
	}
	r.b = r.b[k+n:]
	r.left--
	r.first = false
	r.serial, r.p = s, p
	if r.left == 0 && (s != r.min || len(r.b) != 0) {
		return false, errBadBlock
	}
	return true, nil
}

// blockCount returns the number of postings in a block value.
func blockCount(v []byte) (int, bool) {
	var r blockReader
	if !r.reset(0, v) {
		return 0, false
	}
	return r.left, true
}

// docKey is F ^serial: the search document entry of an event, in the same
// order as its body.
func appendDocKey(dst []byte, serial uint64) []byte { return appendU64(append(dst, pfxDoc), ^serial) }

// appendDocValue appends id(32) created_at(8) meta: what a search match
// is checked against (and returned with) before its body is read.
func appendDocValue(dst []byte, id *nostr.ID, createdAt int64, m *meta) []byte {
	return appendMeta(appendU64(append(dst, id[:]...), uint64(createdAt)), m)
}

func decodeDocValue(b []byte) (nostr.ID, int64, meta, bool) {
	var id nostr.ID
	if len(b) < 40 {
		return id, 0, meta{}, false
	}
	copy(id[:], b)
	ts := int64(binary.BigEndian.Uint64(b[32:]))
	m, ok := decodeMeta(b[40:])
	return id, ts, m, ok && ts >= 0
}

// blockMinSerial returns the oldest serial of a block, from the end of
// its S key.
func blockMinSerial(k []byte) uint64 { return ^binary.BigEndian.Uint64(k[len(k)-8:]) }

func appendSearchStats(dst []byte, st search.Stats) []byte {
	return appendU64(appendU64(dst, uint64(st.Docs)), uint64(st.TotalLen))
}

func decodeSearchStats(b []byte) (search.Stats, bool) {
	if len(b) != 16 {
		return search.Stats{}, false
	}
	st := search.Stats{Docs: int64(binary.BigEndian.Uint64(b)), TotalLen: int64(binary.BigEndian.Uint64(b[8:]))}
	return st, st.Docs >= 0 && st.TotalLen >= 0
}

// getValue reads key from r (the database, a snapshot or an indexed
// batch) and returns a copy of its value; ok is false when key is absent.
func getValue(r pebble.Reader, key []byte) (v []byte, ok bool, err error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = bytes.Clone(v)
	return v, true, closer.Close()
}

// getU64 reads a key holding a uint64(8) from r; 0 and false when absent.
func getU64(r pebble.Reader, key []byte) (uint64, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: %q = %x", errCorrupt, key, v)
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// hasKey reports whether r holds key.
func hasKey(r pebble.Reader, key []byte) (bool, error) {
	_, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}
