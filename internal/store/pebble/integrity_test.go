package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
)

// checkIntegrity scans the whole database and checks that the tables agree:
// every body has its id entry, stream entries, address pointer, expiration
// entry and (when the database has a search index) doc entry and search
// postings, with the right values; every index entry points at a body that
// has it; the search figures are the sums over the bodies. It returns the
// first problems found.
func checkIntegrity(db *pebble.DB) error {
	_, err := integrity(db)
	return err
}

// integrityReport is what integrity found besides problems.
type integrityReport struct {
	blocks   int // S keys
	segments int // G keys
	postings int // postings in them (not counting foldBlocks)
	// foldBlocks are S keys of a staged fold under way (searchFoldKey):
	// each posting in them must be in one of the fold's segments.
	foldBlocks int
	dead       int // postings of removed events (no body, no doc entry)
}

// integrity is checkIntegrity, with figures. Posting blocks must decode,
// hold at most maxBlockPostings postings, and cover disjoint serial ranges
// per term, newest first; a posting of a stored event must be one the
// event has; a posting of no stored event (left by a removal) must have
// no doc entry either and a serial below the search serial.
func integrity(db *pebble.DB) (integrityReport, error) {
	var rep integrityReport
	it, err := db.NewIter(nil)
	if err != nil {
		return rep, err
	}
	defer it.Close()
	want := make(map[string][]byte) // index key -> expected value, from bodies
	got := make(map[string][]byte)  // index key -> value, from the db
	// Postings, by term and serial: expected from the bodies, and found.
	wantPost := make(map[string]posting)
	bodySerials := make(map[uint64]bool)
	var ks keySet
	bodies := 0
	var an search.Analyzer
	var st search.Stats
	_, indexed, err := getValue(db, searchKey)
	if err != nil {
		return rep, err
	}
	var searchSerial uint64   // 0: no postings of removed events allowed
	recordedDead := 0         // searchDeadKey
	recordedEvents := -1      // in the commit state; -1: absent
	var recordedSearch []byte // the commit state's search figures
	var lastTerm []byte       // the term of the previous S key
	var lastMin uint64        // and its block's oldest serial
	var errs []error
	segMin := make(map[string]uint64)    // term -> oldest serial of its blocks in segments
	var foldFirst, foldLast uint64       // searchFoldKey: 0, 0 when absent
	foldEnds := 0                        // segments keyed foldFirst or foldLast
	foldPost := make(map[string]posting) // the postings of those segments
	inFoldSeg := false                   // checkBlock is reading one of them
	var prevLterm []byte
	// checkBlock checks one posting block (an S key's value, or an entry
	// of a G key): newer is the oldest serial of the newer block of its
	// term (0 for none).
	checkBlock := func(k, term []byte, minSerial uint64, v []byte, newer uint64) {
		var r blockReader
		if !r.reset(minSerial, v) {
			errs = append(errs, fmt.Errorf("posting block %x = %x: bad header", k, v))
			return
		}
		if r.left > maxBlockPostings {
			errs = append(errs, fmt.Errorf("posting block %x holds %d postings", k, r.left))
		}
		for first := true; ; first = false {
			ok, err := r.next()
			if err != nil {
				errs = append(errs, fmt.Errorf("posting block %x = %x: %v", k, v, err))
				return
			}
			if !ok {
				return
			}
			rep.postings++
			if inFoldSeg {
				foldPost[string(appendPostingKey(nil, term, r.serial))] = r.p
			}
			if first && newer != 0 && r.serial >= newer {
				errs = append(errs, fmt.Errorf("posting block %x overlaps the newer block of its term", k))
			}
			pk := string(appendPostingKey(nil, term, r.serial))
			if wp, ok := wantPost[pk]; ok {
				if wp != r.p {
					errs = append(errs, fmt.Errorf("posting %x = %+v, want %+v", pk, r.p, wp))
				}
				delete(wantPost, pk)
				continue
			}
			switch {
			case bodySerials[r.serial]:
				errs = append(errs, fmt.Errorf("posting %x of an event that does not have the term", pk))
			case got[string(appendDocKey(nil, r.serial))] != nil:
				errs = append(errs, fmt.Errorf("posting %x of a removed event that has a doc entry", pk))
			case r.serial >= searchSerial:
				errs = append(errs, fmt.Errorf("posting %x of a removed event at or above the search serial %d", pk, searchSerial))
			default:
				rep.dead++
			}
		}
	}
	for valid := it.First(); valid; valid = it.Next() {
		k, v := bytes.Clone(it.Key()), bytes.Clone(it.Value())
		ki, err := DecodeKey(k)
		if err != nil {
			return rep, err
		}
		switch ki.Table {
		case pfxMeta:
			switch {
			case bytes.Equal(k, formatKey) && string(v) == formatVersion:
			case bytes.Equal(k, searchKey) && (string(v) == searchIndexVersion || string(v) == searchIndexV1):
			case bytes.Equal(k, searchFoldKey) && indexed:
				var ok bool
				if foldFirst, foldLast, ok = decodeFold(v); !ok {
					return rep, fmt.Errorf("search fold %x", v)
				}
			case bytes.Equal(k, searchSerialKey) && indexed && len(v) == 8:
				searchSerial = binary.BigEndian.Uint64(v)
			case bytes.Equal(k, commitKey) && len(v) == commitStateLen:
				recordedEvents = int(binary.BigEndian.Uint64(v[8:]))
				recordedSearch = v[16:]
			case bytes.Equal(k, searchDeadKey) && indexed && len(v) == 8:
				recordedDead = int(binary.BigEndian.Uint64(v))
			case bytes.HasPrefix(k, []byte(metaPrefix)): // LoadMeta/SaveMeta blobs
			default:
				return rep, fmt.Errorf("meta key %q = %q", k, v)
			}
		case pfxBody:
			bodies++
			bodySerials[ki.Serial] = true
			pk, raw, ok := decodeBody(v)
			if !ok {
				return rep, fmt.Errorf("body %d undecodable", ki.Serial)
			}
			ev, err := nostr.ParseEvent(raw, nil)
			if err != nil {
				return rep, fmt.Errorf("body %d: %v", ki.Serial, err)
			}
			if ev.PubKey != pk {
				return rep, fmt.Errorf("body %d: pubkey header differs from raw", ki.Serial)
			}
			m := eventMeta(ev, ki.Serial)
			val := appendMeta(nil, &m)
			want[string(idKey(&ev.ID))] = appendIDValue(nil, ev.CreatedAt, &m)
			ks.build(ev)
			for _, ik := range ks.all() {
				want[string(ik)] = val
			}
			if addr, ok := ev.Address(); ok {
				want[string(addrKey(pfxAddr, &addr.PubKey, addr.Kind, addr.D))] = appendAddrValue(nil, ev.CreatedAt, &ev.ID, &m)
			}
			if m.hasExp {
				want[string(expiryKey(m.exp, ki.Serial))] = ev.ID[:]
			}
			if doc := an.Analyze(ev); indexed && !doc.Empty() {
				st.Docs++
				st.TotalLen += int64(doc.Len)
				want[string(appendDocKey(nil, ki.Serial))] = appendDocValue(nil, &ev.ID, ev.CreatedAt, &m)
				p := posting{kind: uint16(ev.Kind), docLen: uint64(doc.Len)}
				for _, t := range doc.Terms {
					p.freq = uint8(t.Freq)
					wantPost[string(appendPostingKey(nil, t.Text, ki.Serial))] = p
				}
			}
		case pfxSearch:
			if !indexed {
				return rep, fmt.Errorf("search entry %x without a search index", k)
			}
			if foldFirst > 0 && ki.Serial >= foldFirst {
				// A block of the fold under way: a copy of postings
				// in its segments, which readers count instead.
				rep.foldBlocks++
				var r blockReader
				if !r.reset(ki.Serial, v) || r.left > maxBlockPostings {
					errs = append(errs, fmt.Errorf("fold block %x = %x: bad header", k, v))
					continue
				}
				for {
					ok, err := r.next()
					if err != nil {
						errs = append(errs, fmt.Errorf("fold block %x = %x: %v", k, v, err))
						break
					}
					if !ok {
						break
					}
					pk := string(appendPostingKey(nil, ki.Term, r.serial))
					if p, ok := foldPost[pk]; !ok || p != r.p {
						errs = append(errs, fmt.Errorf("fold block %x: posting %x is not in the fold's segments", k, pk))
					}
				}
				continue
			}
			// Keys ascend in ^minSerial: the blocks of a term go newest
			// first, each older than the one before.
			if !bytes.Equal(ki.Term, lastTerm) {
				lastTerm, lastMin = bytes.Clone(ki.Term), segMin[string(ki.Term)]
			}
			rep.blocks++
			checkBlock(k, ki.Term, ki.Serial, v, lastMin)
			lastMin = ki.Serial
		case pfxSegment:
			if !indexed {
				return rep, fmt.Errorf("search entry %x without a search index", k)
			}
			sg, ok := parseSegment(v)
			if !ok {
				errs = append(errs, fmt.Errorf("posting segment %x = %x: bad header", k, v))
				continue
			}
			rep.segments++
			inFoldSeg = foldFirst > 0 && ki.Serial >= foldFirst && ki.Serial <= foldLast
			if inFoldSeg && (ki.Serial == foldFirst || ki.Serial == foldLast) {
				foldEnds++
			}
			// Segments go newest first, and so do the blocks of a term
			// in one; every S block is older than every segment.
			for i := 0; i < sg.n; i++ {
				lterm, minSerial, blk, ok := sg.entry(i)
				if !ok || len(lterm) > 1+search.MaxTermLen || (i > 0 && bytes.Compare(lterm, prevLterm) < 0) {
					errs = append(errs, fmt.Errorf("posting segment %x: bad entry %d", k, i))
					break
				}
				prevLterm = lterm
				term := string(lterm[1:])
				if minSerial < ki.Serial {
					errs = append(errs, fmt.Errorf("posting segment %x: entry %d older than the segment", k, i))
				}
				checkBlock(k, lterm[1:], minSerial, blk, segMin[term])
				segMin[term] = minSerial
			}
			inFoldSeg = false
		case pfxDoc:
			if !indexed {
				return rep, fmt.Errorf("search entry %x without a search index", k)
			}
			got[string(k)] = v
		case pfxID, pfxCreated, pfxAuthor, pfxKind, pfxAuthKind, pfxTag, pfxAddr, pfxExpiry:
			got[string(k)] = v
		case pfxDelID:
			if len(v) != 0 {
				return rep, fmt.Errorf("deletion tombstone %x has value %x", k, v)
			}
		case pfxDelAddr, pfxVanish:
			if _, ok := decodeTS(v); !ok {
				return rep, fmt.Errorf("tombstone %x has value %x", k, v)
			}
		}
	}
	if err := it.Error(); err != nil {
		return rep, err
	}
	if !indexed {
		st = search.Stats{} // the figures are zero without an index
	}
	if wantSearch := appendSearchStats(nil, st); recordedSearch != nil && !bytes.Equal(recordedSearch, wantSearch) {
		errs = append(errs, fmt.Errorf("search figures %x recorded, want %x", recordedSearch, wantSearch))
	}
	if foldFirst > 0 && foldEnds != 2 {
		errs = append(errs, fmt.Errorf("search fold %d-%d: its first or last segment is missing", foldFirst, foldLast))
	}
	for k := range wantPost {
		errs = append(errs, fmt.Errorf("missing posting %x", k))
	}
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("missing index entry %x", k))
		case !bytes.Equal(g, v):
			errs = append(errs, fmt.Errorf("index entry %x = %x, want %x", k, g, v))
		}
		delete(got, k)
	}
	for k := range got {
		errs = append(errs, fmt.Errorf("orphan index entry %x", k))
	}
	if recordedEvents != bodies {
		errs = append(errs, fmt.Errorf("event count: %d recorded, %d bodies", recordedEvents, bodies))
	}
	if rep.dead != recordedDead {
		errs = append(errs, fmt.Errorf("search dead postings: %d recorded, %d in the blocks", recordedDead, rep.dead))
	}
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Errorf("... and %d more", len(errs)-5))
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("integrity (%d bodies): %w", bodies, errors.Join(errs...))
	}
	return rep, nil
}
