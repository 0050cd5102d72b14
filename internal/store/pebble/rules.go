package pebble

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// save applies one event. An error is internal and aborts the batch.
func (w *writer) save(ev *nostr.Event, r *request) (store.SaveResult, error) {
	if err := store.CheckEvent(ev); err != nil {
		return store.SaveResult{Outcome: store.Failed, Err: err}, nil
	}
	if r.checked && w.recent.absentSince(&ev.ID, r.token) {
		w.s.precheckHits.Add(1)
	} else if w.absent(&ev.ID) {
		// The filter of stored ids tells: for the events that come without
		// a HasAt token (held events' release, the saves of import, sync
		// and migrate), and for a checked one that a commit since its
		// token may have stored.
	} else if ok, err := w.has(idKey(&ev.ID)); err != nil || ok {
		return store.SaveResult{Outcome: store.Duplicate}, err
	}
	if ev.Kind != nostr.KindDeletion && ev.Kind != nostr.KindRequestToVanish && w.tombstoned.mayContain(&ev.ID) {
		if ok, err := w.has(delIDKey(&ev.ID, &ev.PubKey)); err != nil || ok {
			return store.SaveResult{Outcome: store.Deleted}, err
		}
	}
	if ts, ok := w.vanishedAt(&ev.PubKey); ok && ev.CreatedAt <= ts {
		return store.SaveResult{Outcome: store.Deleted}, nil
	}
	if ev.Kind == nostr.KindGiftWrap && w.wrapVanished(ev) {
		return store.SaveResult{Outcome: store.Deleted}, nil
	}
	var removed []nostr.ID
	addr, isAddr := ev.Address()
	var aKey []byte
	if isAddr {
		if ts, ok, err := w.getTS(addrKey(pfxDelAddr, &addr.PubKey, addr.Kind, addr.D)); err != nil || (ok && ev.CreatedAt <= ts) {
			return store.SaveResult{Outcome: store.Deleted}, err
		}
		aKey = addrKey(pfxAddr, &addr.PubKey, addr.Kind, addr.D)
		v, ok, err := w.get(aKey)
		if err != nil {
			return store.SaveResult{}, err
		}
		if ok {
			ts, id, m, good := decodeAddrValue(v)
			if !good {
				return store.SaveResult{}, fmt.Errorf("%w: address value %x", errCorrupt, v)
			}
			if !store.Newer(ev.CreatedAt, &ev.ID, ts, &id) {
				return store.SaveResult{Outcome: store.Superseded}, nil
			}
			if err := w.removeSerial(m.serial); err != nil {
				return store.SaveResult{}, err
			}
			removed = append(removed, id)
		}
	}
	if err := w.insert(ev, aKey); err != nil {
		return store.SaveResult{}, err
	}
	var err error
	switch ev.Kind {
	case nostr.KindDeletion:
		removed, err = w.applyDeletion(ev, removed)
	case nostr.KindRequestToVanish:
		removed, err = w.applyVanish(ev, removed)
	}
	if err != nil {
		return store.SaveResult{}, err
	}
	return store.SaveResult{Outcome: store.Stored, Seq: w.s.commits.Load() + 1, Removed: removed}, nil
}

// setMaxTS stores ts under key unless a larger value is there.
func (w *writer) setMaxTS(key []byte, ts int64) error {
	cur, ok, err := w.getTS(key)
	if err != nil || (ok && cur >= ts) {
		return err
	}
	return w.b.Set(key, appendU64(nil, uint64(ts)), nil)
}

// applyDeletion applies a stored kind-5 event (NIP-09).
func (w *writer) applyDeletion(ev *nostr.Event, removed []nostr.ID) ([]nostr.ID, error) {
	ids, addrs := ev.DeletionTargets()
	for i := range ids {
		id := &ids[i]
		if err := w.b.Set(delIDKey(id, &ev.PubKey), nil, nil); err != nil {
			return nil, err
		}
		w.tombstoned.add(id) // kept even if the batch fails: a filter only errs on the safe side
		v, ok, err := w.get(idKey(id))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		_, m, good := decodeIDValue(v)
		if !good {
			return nil, fmt.Errorf("%w: id value %x", errCorrupt, v)
		}
		if m.kind == nostr.KindDeletion || m.kind == nostr.KindRequestToVanish || !bytes.Equal(m.pk8[:], ev.PubKey[:8]) {
			continue
		}
		bv, ok, err := w.get(bodyKey(m.serial))
		if err != nil {
			return nil, err
		}
		if pk, _, good := decodeBody(bv); !ok || !good || pk != ev.PubKey {
			continue
		}
		if err := w.removeSerial(m.serial); err != nil {
			return nil, err
		}
		removed = append(removed, *id)
	}
	for _, a := range addrs {
		if a.PubKey != ev.PubKey || !(nostr.IsReplaceable(a.Kind) || nostr.IsAddressable(a.Kind)) {
			continue
		}
		if err := w.setMaxTS(addrKey(pfxDelAddr, &a.PubKey, a.Kind, a.D), ev.CreatedAt); err != nil {
			return nil, err
		}
		v, ok, err := w.get(addrKey(pfxAddr, &a.PubKey, a.Kind, a.D))
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		ts, id, m, good := decodeAddrValue(v)
		if !good {
			return nil, fmt.Errorf("%w: address value %x", errCorrupt, v)
		}
		if ts <= ev.CreatedAt {
			if err := w.removeSerial(m.serial); err != nil {
				return nil, err
			}
			removed = append(removed, id)
		}
	}
	return removed, nil
}

// vanishedAt returns the newest request to vanish of pk, as of this batch.
func (w *writer) vanishedAt(pk *nostr.PubKey) (int64, bool) {
	if ts, ok := w.pendingVanish[*pk]; ok {
		return ts, true
	}
	ts, ok := w.vanished[*pk]
	return ts, ok
}

// wrapVanished reports whether a gift wrap is addressed ("p") to an
// author who asked to vanish at or after its created_at (NIP-62).
func (w *writer) wrapVanished(ev *nostr.Event) bool {
	if len(w.vanished) == 0 && len(w.pendingVanish) == 0 {
		return false
	}
	for _, t := range ev.Tags {
		if len(t) < 2 || t[0] != "p" {
			continue
		}
		if pk, ok := nostr.ParseHex32(t[1]); ok {
			if ts, ok := w.vanishedAt((*nostr.PubKey)(&pk)); ok && ev.CreatedAt <= ts {
				return true
			}
		}
	}
	return false
}

// applyVanish applies a stored kind-62 event (NIP-62): every event of the
// author at or before its created_at goes, except itself, and so does
// every gift wrap (kind 1059) addressed to the author ("p") at or before
// it, whoever wrote it.
func (w *writer) applyVanish(ev *nostr.Event, removed []nostr.ID) ([]nostr.ID, error) {
	if err := w.setMaxTS(vanishKey(&ev.PubKey), ev.CreatedAt); err != nil {
		return nil, err
	}
	if ts, ok := w.vanishedAt(&ev.PubKey); !ok || ev.CreatedAt > ts {
		w.pendingVanish[ev.PubKey] = ev.CreatedAt
	}
	mine := append([]byte{pfxAuthor}, ev.PubKey[:]...)
	removed, err := w.removeStream(mine, ev.CreatedAt, func(id *nostr.ID, _ *meta) bool { return *id != ev.ID }, removed)
	if err != nil {
		return nil, err
	}
	// The gift wraps addressed to the author: the "p" stream of its
	// pubkey. The author's own were removed above, with their index
	// entries.
	wraps, _ := tagPrefix('p', ev.PubKey.Hex())
	return w.removeStream(wraps, ev.CreatedAt, func(_ *nostr.ID, m *meta) bool { return m.kind == nostr.KindGiftWrap }, removed)
}

// removeStream removes the events of the stream under prefix (an index
// of created_at-ordered keys, as seen by the batch) with created_at <= upTo
// that pick chooses, and appends their ids to removed.
func (w *writer) removeStream(prefix []byte, upTo int64, pick func(*nostr.ID, *meta) bool, removed []nostr.ID) ([]nostr.ID, error) {
	lower := appendU64(bytes.Clone(prefix), inv(upTo))
	it, err := w.newIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	type victim struct {
		id     nostr.ID
		serial uint64
	}
	var victims []victim
	for it.First(); it.Valid(); it.Next() {
		_, id, ok := decodeTail(it.Key())
		m, good := decodeMeta(it.Value())
		if !ok || !good {
			it.Close()
			return nil, fmt.Errorf("%w: index entry %x", errCorrupt, it.Key())
		}
		if pick(&id, &m) {
			victims = append(victims, victim{id, m.serial})
		}
	}
	if err := closeIter(it); err != nil {
		return nil, err
	}
	for _, v := range victims {
		if err := w.removeSerial(v.serial); err != nil {
			return nil, err
		}
		removed = append(removed, v.id)
	}
	return removed, nil
}

// purge removes up to purgeChunk events whose expiration is at or before
// r.now, and sets r.more when there may be more.
func (w *writer) purge(r *request) error {
	upper := []byte{pfxExpiry}
	if r.now >= 0 {
		upper = appendU64(upper, uint64(r.now)+1)
	}
	it, err := w.newIter(&pebble.IterOptions{LowerBound: []byte{pfxExpiry}, UpperBound: upper})
	if err != nil {
		return err
	}
	var serials []uint64
	for it.First(); it.Valid() && len(serials) < purgeChunk; it.Next() {
		k := it.Key()
		if len(k) != 17 {
			it.Close()
			return fmt.Errorf("%w: expiry key %x", errCorrupt, k)
		}
		serials = append(serials, binary.BigEndian.Uint64(k[9:]))
	}
	r.more = it.Valid()
	if err := closeIter(it); err != nil {
		return err
	}
	for _, s := range serials {
		if err := w.removeSerial(s); err != nil {
			return err
		}
	}
	r.n = len(serials)
	return nil
}
