package pebble

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
)

type opKind uint8

const (
	opSave   opKind = iota + 1 // events, results; waiter on done
	opSubmit                   // one event; callback
	opDelete                   // ids; n
	opPurge                    // now; n, more
)

// request is one unit of work for the writer. The writer owns it from
// enqueue until it closes done (or calls callback).
type request struct {
	op       opKind
	events   []*nostr.Event
	callback func(store.SaveResult)
	ids      []nostr.ID
	now      int64
	token    uint64 // with checked: the HasAt token of the event's id
	checked  bool

	// Set by the writer before done is closed.
	results []store.SaveResult
	n       int
	more    bool
	err     error
	done    chan struct{}
}

// weight is the request's share of a batch, in events and bytes.
func (r *request) weight() (int, int) {
	switch r.op {
	case opSave, opSubmit:
		b := 0
		for _, ev := range r.events {
			if ev != nil {
				b += len(ev.Raw) + 256
			}
		}
		return len(r.events), b
	case opDelete:
		return len(r.ids), 0
	}
	return purgeChunk, 0
}

// writer is the single goroutine that applies writes. It drains whatever
// is queued (up to MaxBatch events or MaxBatchBytes bytes), applies the
// requests in order into one indexed pebble batch (so a later event sees
// the effects of earlier ones through the batch), commits it, and then
// reports to every request in the batch.
type writer struct {
	s      *Store
	serial uint64 // next body serial
	b      *pebble.Batch
	keys   keySet

	// vanished mirrors the W table (authors who asked to vanish, and the
	// newest such request), so that saves need not look it up: it is
	// small. pendingVanish holds the current batch's changes until commit.
	vanished      map[nostr.PubKey]int64
	pendingVanish map[nostr.PubKey]int64

	// tombstoned filters the ids that have D keys, so that saving an
	// event costs no tombstone lookup unless its id may have one. Sized at
	// open from the number of tombstones; it only grows less precise as
	// tombstones are added until the next open.
	tombstoned *idBloom

	// Search index (nil analyzer when Options.DisableSearch): the
	// committed collection figures, and the current batch's change to
	// them, written to searchStatsKey at the end of the batch.
	an          *search.Analyzer
	searchStats search.Stats
	searchDelta search.Stats
	keyBuf      []byte
	valBuf      []byte

	// The current batch's postings, written as blocks at its end;
	// batchStart is the first serial the batch allocates (its events'
	// postings are still in post). leftDead is set when the batch
	// removes an event whose postings are already in committed blocks:
	// they stay there, so the batch writes searchSerialKey.
	post       postingBuf
	batchStart uint64
	leftDead   bool
	// dead counts the postings of removed events left in committed
	// blocks (searchDeadKey); deadDelta is the current batch's share.
	dead, deadDelta uint64

	// recent spares the duplicate lookup of events checked with HasAt.
	recent *recentIDs
	// stored are the events the current batch stores, with their serials
	// and bodies (for Store.addSeen and Store.bodies once committed).
	stored []storedBody
}

// storedBody is an event the current batch stores.
type storedBody struct {
	serial uint64
	ev     *nostr.Event
	raw    []byte
}

func newWriter(s *Store) (*writer, error) {
	w := &writer{s: s, serial: 1, vanished: make(map[nostr.PubKey]int64), pendingVanish: make(map[nostr.PubKey]int64),
		recent: newRecentIDs(s.opts.recentIDs)}
	vit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxVanish}, UpperBound: []byte{pfxVanish + 1}})
	if err != nil {
		return nil, err
	}
	for vit.First(); vit.Valid(); vit.Next() {
		k := vit.Key()
		ts, ok := decodeTS(vit.Value())
		if len(k) != 33 || !ok {
			vit.Close()
			return nil, fmt.Errorf("%w: vanish entry %x", errCorrupt, k)
		}
		w.vanished[nostr.PubKey(k[1:])] = ts
	}
	if err := closeIter(vit); err != nil {
		return nil, err
	}
	var dead []nostr.ID
	dit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxDelID}, UpperBound: []byte{pfxDelID + 1}})
	if err != nil {
		return nil, err
	}
	for dit.First(); dit.Valid(); dit.Next() {
		k := dit.Key()
		if len(k) != 65 {
			dit.Close()
			return nil, fmt.Errorf("%w: tombstone %x", errCorrupt, k)
		}
		dead = append(dead, nostr.ID(k[1:33]))
	}
	if err := closeIter(dit); err != nil {
		return nil, err
	}
	w.tombstoned = newIDBloom(idBloomBytes(int64(len(dead)), seenMinBytes, 1<<40))
	for i := range dead {
		w.tombstoned.add(&dead[i])
	}
	if !s.opts.DisableSearch {
		w.an = new(search.Analyzer)
		v, closer, err := s.db.Get(searchStatsKey)
		if err != nil {
			return nil, fmt.Errorf("search stats: %w", err)
		}
		st, ok := decodeSearchStats(v)
		closer.Close()
		if !ok {
			return nil, fmt.Errorf("%w: search stats %x", errCorrupt, v)
		}
		w.searchStats = st
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxBody}, UpperBound: []byte{pfxBody + 1}})
	if err != nil {
		return nil, err
	}
	if it.First() { // the highest serial sorts first
		k := it.Key()
		if len(k) != 9 {
			it.Close()
			return nil, fmt.Errorf("%w: body key %x", errCorrupt, k)
		}
		w.serial = ^binary.BigEndian.Uint64(k[1:]) + 1
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	// Postings of removed events may remain for serials below the
	// search serial: never allocate those again (the newest events may
	// have been removed since), or their old postings would count for
	// new events.
	if w.an != nil {
		floor, err := s.getMetaU64(searchSerialKey)
		if err != nil {
			return nil, err
		}
		w.serial = max(w.serial, floor)
		if w.dead, err = s.getMetaU64(searchDeadKey); err != nil {
			return nil, err
		}
		s.deadPostings.Store(w.dead)
	}
	return w, nil
}

func (w *writer) run() {
	defer close(w.s.writerDone)
	maxEvents, maxBytes := w.s.opts.MaxBatch, w.s.opts.MaxBatchBytes
	var reqs []*request
	for {
		r, ok := <-w.s.queue
		if !ok {
			return
		}
		reqs = append(reqs[:0], r)
		n, b := r.weight()
		open := true
	drain:
		for n < maxEvents && b < maxBytes {
			select {
			case r, ok := <-w.s.queue:
				if !ok {
					open = false
					break drain
				}
				reqs = append(reqs, r)
				dn, db := r.weight()
				n, b = n+dn, b+db
			default:
				break drain
			}
		}
		w.commit(reqs)
		clear(reqs)
		if !open {
			return
		}
	}
}

// commit applies reqs in one indexed batch, commits it (synced unless
// Options.NoSync), then reports to each request. While the commit waits
// for the WAL sync, new requests queue up and make the next batch: that is
// the group commit. (Pipelining the next batch's apply with this sync, via
// pebble's ApplyNoSyncWait, measured no better on the dev machine.)
func (w *writer) commit(reqs []*request) {
	w.b = w.s.db.NewIndexedBatch()
	w.post.reset()
	w.batchStart, w.leftDead, w.deadDelta = w.serial, false, 0
	var err error
	for _, r := range reqs {
		if err = w.apply(r); err != nil {
			break
		}
	}
	if err == nil && w.an != nil {
		_, err = w.post.flush(w.b, false)
	}
	if err == nil && w.leftDead {
		err = w.b.Set(searchSerialKey, appendU64(nil, w.serial), nil)
	}
	if err == nil && w.deadDelta > 0 {
		err = w.b.Set(searchDeadKey, appendU64(nil, w.dead+w.deadDelta), nil)
	}
	if err == nil && w.searchDelta != (search.Stats{}) {
		st := search.Stats{Docs: w.searchStats.Docs + w.searchDelta.Docs, TotalLen: w.searchStats.TotalLen + w.searchDelta.TotalLen}
		err = w.b.Set(searchStatsKey, appendSearchStats(nil, st), nil)
	}
	if err == nil && len(w.stored) > 0 {
		// The position every Stored result of this batch reports; the
		// counter itself moves on only once the commit is done.
		err = w.b.Set(commitKey, appendU64(nil, w.s.commits.Load()+1), nil)
	}
	if err == nil && !w.b.Empty() {
		opt := pebble.Sync
		if w.s.opts.NoSync {
			opt = pebble.NoSync
		}
		err = w.b.Commit(opt)
	}
	w.b.Close()
	w.b = nil
	if err != nil {
		err = fmt.Errorf("store/pebble: commit: %w", err)
		w.s.log.Error("store: write batch failed", "err", err)
		clear(w.pendingVanish)
		w.recent.failed()
	} else {
		w.keepVanish()
		if w.deadDelta > 0 {
			w.dead += w.deadDelta
			w.s.deadPostings.Store(w.dead)
		}
		if len(w.stored) > 0 {
			w.s.addSeen(w.stored) // before the commit count moves on
			for _, b := range w.stored {
				w.s.bodies.add(b.serial, &b.ev.PubKey, b.raw)
			}
			w.recent.committed(w.s.commits.Add(1))
		}
		w.searchStats.Docs += w.searchDelta.Docs
		w.searchStats.TotalLen += w.searchDelta.TotalLen
	}
	w.searchDelta = search.Stats{}
	clear(w.stored)
	w.stored = w.stored[:0]
	for _, r := range reqs {
		w.report(r, err)
	}
}

// keepVanish makes the batch's requests to vanish part of w.vanished once
// the batch is applied.
func (w *writer) keepVanish() {
	for pk, ts := range w.pendingVanish {
		w.vanished[pk] = ts
	}
	clear(w.pendingVanish)
}

func (w *writer) report(r *request, err error) {
	if err != nil {
		r.err = err
		r.n, r.more = 0, false
		if r.op == opSave || r.op == opSubmit {
			r.results = make([]store.SaveResult, len(r.events))
			for i := range r.results {
				r.results[i] = store.SaveResult{Outcome: store.Failed, Err: err}
			}
		}
	}
	if r.op == opSubmit {
		if r.callback != nil {
			r.callback(r.results[0])
		}
		return
	}
	close(r.done)
}

// apply applies one request to the batch. An error aborts the batch.
func (w *writer) apply(r *request) error {
	switch r.op {
	case opSave, opSubmit:
		r.results = make([]store.SaveResult, len(r.events))
		for i, ev := range r.events {
			res, err := w.save(ev, r)
			if err != nil {
				return err
			}
			r.results[i] = res
		}
	case opDelete:
		for i := range r.ids {
			ok, err := w.removeID(&r.ids[i])
			if err != nil {
				return err
			}
			if ok {
				r.n++
			}
		}
	case opPurge:
		return w.purge(r)
	}
	return nil
}

// get reads key through the batch (so it sees this batch's writes). The
// returned value is a copy.
func (w *writer) get(key []byte) ([]byte, bool, error) { return getValue(w.b, key) }

func (w *writer) has(key []byte) (bool, error) { return hasKey(w.b, key) }

// getTS reads an 8-byte created_at value (R and W keys).
func (w *writer) getTS(key []byte) (int64, bool, error) {
	v, ok, err := w.get(key)
	if !ok || err != nil {
		return 0, false, err
	}
	ts, good := decodeTS(v)
	if !good {
		return 0, false, fmt.Errorf("%w: value %x of %x", errCorrupt, v, key)
	}
	return ts, true, nil
}

// save applies one event. An error is internal and aborts the batch.
func (w *writer) save(ev *nostr.Event, r *request) (store.SaveResult, error) {
	if err := store.CheckEvent(ev); err != nil {
		return store.SaveResult{Outcome: store.Failed, Err: err}, nil
	}
	if r.checked && w.recent.absentSince(&ev.ID, r.token) {
		w.s.precheckHits.Add(1)
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

// insert writes the event's body and every index entry.
func (w *writer) insert(ev *nostr.Event, aKey []byte) error {
	raw := ev.Raw
	if len(raw) == 0 {
		raw = nostr.Serialize(ev)
	}
	m := eventMeta(ev, w.serial)
	w.serial++
	var buf [metaLen + 8 + 40]byte
	val := appendMeta(buf[:0], &m)
	b := w.b
	body := b.SetDeferred(9, 32+len(raw))
	appendBodyKey(body.Key[:0], m.serial)
	copy(body.Value, ev.PubKey[:])
	copy(body.Value[32:], raw)
	if err := body.Finish(); err != nil {
		return err
	}
	if err := b.Set(idKey(&ev.ID), appendIDValue(nil, ev.CreatedAt, &m), nil); err != nil {
		return err
	}
	w.recent.stored(&ev.ID)
	w.stored = append(w.stored, storedBody{m.serial, ev, raw})
	w.keys.build(ev)
	for _, k := range w.keys.all() {
		if err := b.Set(k, val, nil); err != nil {
			return err
		}
	}
	if aKey != nil {
		if err := b.Set(aKey, appendAddrValue(nil, ev.CreatedAt, &ev.ID, &m), nil); err != nil {
			return err
		}
	}
	if m.hasExp {
		if err := b.Set(expiryKey(m.exp, m.serial), ev.ID[:], nil); err != nil {
			return err
		}
	}
	return w.index(ev, &m, false)
}

// index adds (or, with remove, removes) the search postings and doc
// entry of ev, stored with meta m (only m.serial is used to remove), and
// counts the change to the collection figures. It does nothing when
// search is disabled or ev has nothing searchable.
//
// Postings go to w.post and are written as blocks at the end of the
// batch. Removing an event of this batch drops its postings from there;
// the postings of an event of an earlier batch stay in their blocks
// (rewriting a block per term would cost more than it saves): the doc
// entry is the truth, and a search skips a posting without one. See
// docs/storage.md, "Search".
func (w *writer) index(ev *nostr.Event, m *meta, remove bool) error {
	if w.an == nil {
		return nil
	}
	doc := w.an.Analyze(ev)
	if doc.Empty() {
		return nil
	}
	serial := m.serial
	w.keyBuf = appendDocKey(w.keyBuf[:0], serial)
	if remove {
		if err := w.b.Delete(w.keyBuf, nil); err != nil {
			return err
		}
		if serial >= w.batchStart {
			for i := range doc.Terms {
				w.post.drop(doc.Terms[i].Text, serial)
			}
		} else {
			w.leftDead = true
			w.deadDelta += uint64(len(doc.Terms))
		}
		w.searchDelta.Docs--
		w.searchDelta.TotalLen -= int64(doc.Len)
		return nil
	}
	w.valBuf = appendDocValue(w.valBuf[:0], &ev.ID, ev.CreatedAt, m)
	if err := w.b.Set(w.keyBuf, w.valBuf, nil); err != nil {
		return err
	}
	p := posting{kind: uint16(ev.Kind), docLen: uint64(doc.Len)}
	for i := range doc.Terms {
		t := &doc.Terms[i]
		p.freq = uint8(t.Freq)
		w.post.add(t.Text, serial, p)
	}
	w.searchDelta.Docs++
	w.searchDelta.TotalLen += int64(doc.Len)
	return nil
}

func eventMeta(ev *nostr.Event, serial uint64) meta {
	m := meta{serial: serial, kind: uint16(ev.Kind)}
	copy(m.pk8[:], ev.PubKey[:8])
	m.exp, m.hasExp = ev.Expiration()
	return m
}

// removeID removes the event with this id, if stored.
func (w *writer) removeID(id *nostr.ID) (bool, error) {
	v, ok, err := w.get(idKey(id))
	if !ok || err != nil {
		return false, err
	}
	_, m, good := decodeIDValue(v)
	if !good {
		return false, fmt.Errorf("%w: id value %x", errCorrupt, v)
	}
	return true, w.removeSerial(m.serial)
}

// loadEvent reads and parses the body with this serial.
func (w *writer) loadEvent(serial uint64) (*nostr.Event, error) {
	v, ok, err := w.get(bodyKey(serial))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: no body for serial %d", errCorrupt, serial)
	}
	_, raw, good := decodeBody(v)
	if !good {
		return nil, fmt.Errorf("%w: body %d", errCorrupt, serial)
	}
	ev, err := nostr.ParseEvent(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: body %d: %v", errCorrupt, serial, err)
	}
	return ev, nil
}

// removeSerial removes the event stored under serial: its body and every
// index entry, its address pointer and its expiration entry.
func (w *writer) removeSerial(serial uint64) error {
	ev, err := w.loadEvent(serial)
	if err != nil {
		return err
	}
	b := w.b
	if err := b.Delete(bodyKey(serial), nil); err != nil {
		return err
	}
	if err := b.Delete(idKey(&ev.ID), nil); err != nil {
		return err
	}
	w.keys.build(ev)
	for _, k := range w.keys.all() {
		if err := b.Delete(k, nil); err != nil {
			return err
		}
	}
	if addr, ok := ev.Address(); ok {
		ak := addrKey(pfxAddr, &addr.PubKey, addr.Kind, addr.D)
		v, ok, err := w.get(ak)
		if err != nil {
			return err
		}
		if ok {
			if _, id, _, good := decodeAddrValue(v); good && id == ev.ID {
				if err := b.Delete(ak, nil); err != nil {
					return err
				}
			}
		}
	}
	if exp, ok := ev.Expiration(); ok {
		if err := b.Delete(expiryKey(exp, serial), nil); err != nil {
			return err
		}
	}
	return w.index(ev, &meta{serial: serial}, true)
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
	it, err := w.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
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

func closeIter(it *pebble.Iterator) error {
	err := it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// purge removes up to purgeChunk events whose expiration is at or before
// r.now, and sets r.more when there may be more.
func (w *writer) purge(r *request) error {
	upper := []byte{pfxExpiry}
	if r.now >= 0 {
		upper = appendU64(upper, uint64(r.now)+1)
	}
	it, err := w.b.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxExpiry}, UpperBound: upper})
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

// keySet builds the stream-index keys (C, P, K, Q, T) of one event into
// one reused buffer.
type keySet struct {
	buf  []byte
	ends []int
}

func (ks *keySet) add(k []byte) {
	ks.buf = k
	ks.ends = append(ks.ends, len(k))
}

func (ks *keySet) build(ev *nostr.Event) {
	ks.buf, ks.ends = ks.buf[:0], ks.ends[:0]
	b := ks.buf
	b = appendTail(append(b, pfxCreated), ev.CreatedAt, &ev.ID)
	ks.add(b)
	b = appendTail(append(append(b, pfxAuthor), ev.PubKey[:]...), ev.CreatedAt, &ev.ID)
	ks.add(b)
	b = appendTail(appendU16(append(b, pfxKind), uint16(ev.Kind)), ev.CreatedAt, &ev.ID)
	ks.add(b)
	b = appendTail(appendU16(append(append(b, pfxAuthKind), ev.PubKey[:]...), uint16(ev.Kind)), ev.CreatedAt, &ev.ID)
	ks.add(b)
	start := len(ks.ends)
	for _, t := range ev.Tags {
		if len(t) < 2 || len(t[0]) != 1 {
			continue
		}
		mark := len(b)
		b = append(b, pfxTag, t[0][0])
		b, _ = appendTagValue(b, t[1])
		b = appendTail(b, ev.CreatedAt, &ev.ID)
		// Skip a key this event already has (repeated tags).
		dup := false
		for i := start; i < len(ks.ends); i++ {
			if bytes.Equal(b[ks.ends[i-1]:ks.ends[i]], b[mark:]) {
				dup = true
				break
			}
		}
		if dup {
			b = b[:mark]
			continue
		}
		ks.add(b)
	}
	ks.buf = b
}

// all returns the keys; they are valid until the next build.
func (ks *keySet) all() [][]byte {
	out := make([][]byte, len(ks.ends))
	start := 0
	for i, end := range ks.ends {
		out[i] = ks.buf[start:end:end]
		start = end
	}
	return out
}

var _ io.Closer = (*pebble.Iterator)(nil)
