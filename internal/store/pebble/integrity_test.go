package pebble

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
)

// getKey reads one key.
func getKey(db *pebble.DB, key []byte) ([]byte, bool, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = bytes.Clone(v)
	closer.Close()
	return v, true, nil
}

// checkIntegrity scans the whole database and checks that the tables agree:
// every body has its id entry, stream entries, address pointer, expiration
// entry and (when the database has a search index) search postings, with
// the right values; every index entry points at a body that has it; the
// search figures are the sums over the bodies. It returns the first
// problems found.
func checkIntegrity(db *pebble.DB) error {
	it, err := db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	want := make(map[string][]byte) // index key -> expected value, from bodies
	got := make(map[string][]byte)  // index key -> value, from the db
	var ks keySet
	bodies := 0
	var an search.Analyzer
	var st search.Stats
	_, indexed, err := getKey(db, searchKey)
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		k, v := bytes.Clone(it.Key()), bytes.Clone(it.Value())
		ki, err := DecodeKey(k)
		if err != nil {
			return err
		}
		switch ki.Table {
		case pfxMeta:
			switch {
			case bytes.Equal(k, formatKey) && string(v) == formatVersion:
			case bytes.Equal(k, searchKey) && string(v) == search.Version:
			case bytes.Equal(k, searchStatsKey) && indexed:
				got[string(k)] = v
			case bytes.HasPrefix(k, []byte(metaPrefix)): // LoadMeta/SaveMeta blobs
			default:
				return fmt.Errorf("meta key %q = %q", k, v)
			}
		case pfxBody:
			bodies++
			pk, raw, ok := decodeBody(v)
			if !ok {
				return fmt.Errorf("body %d undecodable", ki.Serial)
			}
			ev, err := nostr.ParseEvent(raw, nil)
			if err != nil {
				return fmt.Errorf("body %d: %v", ki.Serial, err)
			}
			if ev.PubKey != pk {
				return fmt.Errorf("body %d: pubkey header differs from raw", ki.Serial)
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
					want[string(appendPostingKey(nil, t.Text, ki.Serial))] = appendPosting(nil, p)
				}
			}
		case pfxSearch, pfxDoc:
			if !indexed {
				return fmt.Errorf("search entry %x without a search index", k)
			}
			got[string(k)] = v
		case pfxID, pfxCreated, pfxAuthor, pfxKind, pfxAuthKind, pfxTag, pfxAddr, pfxExpiry:
			got[string(k)] = v
		case pfxDelID:
			if len(v) != 0 {
				return fmt.Errorf("deletion tombstone %x has value %x", k, v)
			}
		case pfxDelAddr, pfxVanish:
			if _, ok := decodeTS(v); !ok {
				return fmt.Errorf("tombstone %x has value %x", k, v)
			}
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if indexed {
		want[string(searchStatsKey)] = appendSearchStats(nil, st)
	}
	var errs []error
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
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Errorf("... and %d more", len(errs)-5))
	}
	if len(errs) > 0 {
		return fmt.Errorf("integrity (%d bodies): %w", bodies, errors.Join(errs...))
	}
	return nil
}
