package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
)

type opKind uint8

const (
	opSave       opKind = iota + 1 // events, results; waiter on done
	opSubmit                       // one event; callback
	opDelete                       // ids; n
	opPurge                        // now; n, more
	opTombstones                   // tombs
	opHold                         // one event, held unverified; callback
	opRelease                      // one held event, now verified; callback
	opReject                       // one held event, found invalid; rejected
	opFold                         // fold the posting segments into S blocks now
)

// request is one unit of work for the writer. The writer owns it from
// enqueue until it closes done (or calls callback).
type request struct {
	op       opKind
	events   []*nostr.Event
	callback func(store.SaveResult)
	rejected func(error) // opReject's callback
	ids      []nostr.ID
	tombs    []store.Tombstone
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

// Weight is the request's share of a batch (store.Weighed), in events
// and bytes.
func (r *request) Weight() (int, int) {
	switch r.op {
	case opSave, opSubmit, opHold, opRelease:
		b := 0
		for _, ev := range r.events {
			if ev != nil {
				b += len(ev.Raw) + 256
			}
		}
		return len(r.events), b
	case opDelete:
		return len(r.ids), 0
	case opTombstones:
		return len(r.tombs), 0
	case opReject:
		return 1, 0
	case opFold:
		return 0, 0
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
	// b is the batch being built. A read may replace it with an indexed
	// copy (reader): write through w.b, and hold no copy of it across a
	// read.
	b    *pebble.Batch
	keys keySet

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
	// them, written in the commit state (commitKey) at the end of the
	// batch.
	an          *search.Analyzer
	searchStats search.Stats
	searchDelta search.Stats
	keyBuf      []byte
	valBuf      []byte

	// pend holds the postings of the committed segments (G keys) and
	// the current batch's (postingBuf.newBatch), oldest first per term,
	// for the batch that folds them into S blocks (see segments.go);
	// pendSegs and pendPostings count the segments' and theirs. The
	// batch's are written at its end (as a segment, or folded into
	// blocks: writePostings). batchStart is the first serial the batch
	// allocates (its events' postings are still the batch's in pend).
	// leftDead is set when the batch removes an event whose postings are
	// already committed (in blocks or segments): they stay there, so the
	// batch writes searchSerialKey. seg and segVal are buffers for a
	// batch's segment.
	batchStart   uint64
	leftDead     bool
	pend         postingBuf
	pendSegs     int
	pendPostings int
	pendKeys     []uint64  // the oldest serial (key) of each segment
	fold         foldState // a fold written over several batches, if one is under way
	seg          segmentWriter
	segVal       []byte
	forceFold    bool // an opFold in the batch
	// dead counts the postings of removed events left in committed
	// blocks (searchDeadKey); deadDelta is the current batch's share.
	dead, deadDelta uint64
	// events counts the stored events (in the commit state); eventsDelta
	// is the current batch's change to it.
	events, eventsDelta int64

	// recent spares the duplicate lookup of events checked with HasAt.
	recent *recentIDs
	// stored are the events the current batch stores, with their serials
	// and bodies (for Store.addSeen and Store.bodies once committed).
	stored []storedBody

	// ops is commitSorted's buffer: the batch's operations, sorted;
	// sorted is the batch it commits them in, kept between commits.
	ops    []batchOp
	sorted *pebble.Batch
}

// storedBody is an event the current batch stores.
type storedBody struct {
	serial uint64
	ev     *nostr.Event
	raw    []byte
}

// newWriter prepares the writer of s, whose commit state (read at Open)
// is c.
func newWriter(s *Store, c commitState) (*writer, error) {
	w := &writer{s: s, serial: 1, vanished: make(map[nostr.PubKey]int64), pendingVanish: make(map[nostr.PubKey]int64),
		recent: newRecentIDs(s.opts.recentIDs)}
	// The segments' lists live across many batches: keep them up to a
	// fold's worth, so that each fold does not grow them anew.
	w.pend.keep = foldPostings
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
		w.searchStats = c.search
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
		if err := w.loadPending(); err != nil {
			return nil, err
		}
	}
	w.events = int64(c.events)
	s.events.Store(w.events)
	return w, nil
}

func (w *writer) run() {
	defer close(w.s.writerDone)
	defer func() {
		if w.sorted != nil {
			w.sorted.Close()
		}
	}()
	maxEvents, maxBytes := w.s.opts.MaxBatch, w.s.opts.MaxBatchBytes
	var reqs []*request
	for {
		var open bool
		reqs, open = store.NextBatch(w.s.queue, reqs, maxEvents, maxBytes)
		if len(reqs) > 0 {
			w.commit(reqs)
			clear(reqs)
		}
		if !open {
			return
		}
		// Let what the report woke run before the next batch: the
		// callers that queue the OKs, the flushers that write them, the
		// sockets' readers. On one processor the writer would otherwise
		// go straight on to build and apply the next batch, and they would
		// wait for its sync (docs/BENCHMARKS.md, issue 19: ten alternated
		// pairs of ladders, the knee a step or two higher in four, lower
		// in one).
		runtime.Gosched()
	}
}

// commit applies reqs in one batch, commits it (synced unless
// Options.NoSync), then reports to each request. While the commit waits
// for the WAL sync, new requests queue up and make the next batch: that is
// the group commit. (Pipelining the next batch's apply with this sync, via
// pebble's ApplyNoSyncWait, measured no better on the dev machine.)
func (w *writer) commit(reqs []*request) {
	var t0 time.Time
	if w.s.opts.onBatch != nil {
		t0 = time.Now()
	}
	w.b = w.s.db.NewBatch()
	w.pend.newBatch()
	w.batchStart, w.leftDead, w.deadDelta, w.eventsDelta = w.serial, false, 0, 0
	var err error
	for _, r := range reqs {
		if err = w.apply(r); err != nil {
			break
		}
	}
	folded := 0
	if err == nil && w.an != nil {
		folded, err = w.writePostings()
	}
	if err == nil && w.leftDead {
		err = w.b.Set(searchSerialKey, appendU64(nil, w.serial), nil)
	}
	if err == nil && w.deadDelta > 0 {
		err = w.b.Set(searchDeadKey, appendU64(nil, w.dead+w.deadDelta), nil)
	}
	if err == nil && (len(w.stored) > 0 || w.eventsDelta != 0 || w.searchDelta != (search.Stats{})) {
		// The position every Stored result of this batch reports (the
		// counter itself moves on only once the commit is done), with
		// the figures the batch leaves.
		c := commitState{
			pos:    w.s.commits.Load(),
			events: uint64(w.events + w.eventsDelta),
			search: search.Stats{Docs: w.searchStats.Docs + w.searchDelta.Docs, TotalLen: w.searchStats.TotalLen + w.searchDelta.TotalLen},
		}
		if len(w.stored) > 0 {
			c.pos++
		}
		err = w.b.Set(commitKey, appendCommitState(nil, c), nil)
	}
	if err == nil && !w.b.Empty() {
		err = w.s.spaceFor(int(w.b.Len()))
	}
	if err == nil && !w.b.Empty() && w.s.opts.CommitFault != nil {
		err = w.s.opts.CommitFault()
	}
	if err == nil && !w.b.Empty() {
		opt := pebble.Sync
		if w.s.opts.NoSync || !needSync(reqs) {
			opt = pebble.NoSync
		}
		err = w.commitSorted(opt)
		if err == nil && opt == pebble.Sync {
			w.s.syncs.Add(1)
		}
		if err == nil {
			w.s.writeOps.Add(uint64(w.b.Count()))
			w.s.writeBytes.Add(uint64(w.b.Len()))
		}
	}
	keys := w.b.Count()
	w.b.Close()
	w.b = nil
	if err != nil {
		err = fmt.Errorf("store/pebble: commit: %w", err)
		if !errors.Is(err, store.ErrDiskFull) { // logged once, above
			w.s.log.Error("store: write batch failed", "err", err)
		}
		clear(w.pendingVanish)
		w.recent.failed()
		if w.an != nil {
			// w.pend and w.fold may hold this batch's changes: read
			// them again (a fold under way starts over: its blocks
			// written so far are written again, the same keys with the
			// same values).
			if lerr := w.loadPending(); lerr != nil {
				w.s.log.Error("store: reading the posting segments failed", "err", lerr)
			}
		}
	} else {
		if w.s.opts.onBatch != nil {
			w.s.opts.onBatch(keys, time.Since(t0), folded)
		}
		w.keepVanish()
		if w.deadDelta > 0 {
			w.dead += w.deadDelta
			w.s.deadPostings.Store(w.dead)
		}
		if w.eventsDelta != 0 {
			w.events += w.eventsDelta
			w.s.events.Store(w.events)
		}
		if len(w.stored) > 0 {
			w.s.addSeen(w.stored) // before the commit count moves on
			for _, b := range w.stored {
				w.s.bodies.add(b.serial, &b.ev.PubKey, b.raw)
			}
			w.recent.committed(w.s.commits.Add(1))
			w.s.pace.committed()
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

// writePostings writes the batch's postings (in w.pend), and returns how
// many S blocks of a fold it wrote. The batch's postings go into one
// segment (a G key) while the segments stay within maxSegments and
// foldPostings. The batch that would take them past either folds them
// (with its own postings): it writes their postings as S blocks, one
// per term (more past maxBlockPostings), and deletes the segments. A
// fold of at most foldChunk blocks is written by that batch alone; a
// larger one is staged (foldState): the batch writes its postings as a
// segment too, marks the fold under way (searchFoldKey) and writes its
// first foldState.per blocks, and each following batch writes the next
// ones, the last also deleting the segments and the mark. A forced fold
// (opFold), a batch of bigFoldPostings postings or more and an index
// without segments fold everything at once, finishing a fold under way.
// The writer's copies (w.pend, w.fold) change as the batch is built; a
// failed commit reads them again from the database.
func (w *writer) writePostings() (folded int, err error) {
	n := w.pend.bn
	force := w.forceFold && (w.pendSegs > 0 || w.fold.active())
	w.forceFold = false
	if n == 0 && !force && !w.fold.active() {
		return 0, nil
	}
	full := force || !w.s.segments || n >= bigFoldPostings
	if full || w.pendSegs+1 > maxSegments || w.pendPostings+n > foldPostings {
		if w.fold.active() {
			k, err := w.finishFold()
			if folded += k; err != nil {
				return folded, err
			}
		}
		w.fold.freeze(&w.pend)
		staged := !full && len(w.fold.blocks) > foldChunk
		if staged && n > 0 {
			// This batch's postings are a segment of the fold (readers
			// find them there until the fold is complete).
			if err := w.writeSegment(); err != nil {
				return folded, err
			}
		}
		w.fold.keys = append(w.fold.keys[:0], w.pendKeys...)
		w.pendKeys = w.pendKeys[:0]
		w.pendSegs, w.pendPostings = 0, 0
		w.pend.reset()
		if !staged {
			// At once: the fold's blocks and the deletion of its segments.
			k, err := w.finishFold()
			return folded + k, err
		}
		w.valBuf = appendU64(appendU64(w.valBuf[:0], w.fold.keys[0]), w.fold.keys[len(w.fold.keys)-1])
		if err := w.b.Set(searchFoldKey, w.valBuf, nil); err != nil {
			return folded, err
		}
		w.fold.marked = true
		k, err := w.foldStep()
		return folded + k, err
	}
	if w.fold.active() {
		if folded, err = w.foldStep(); err != nil {
			return folded, err
		}
	}
	if n > 0 {
		if err := w.writeSegment(); err != nil {
			return folded, err
		}
	}
	return folded, nil
}

// writeSegment writes the batch's postings (the batch's in w.pend) as a
// segment, and counts it in w.pendSegs, w.pendPostings and w.pendKeys.
func (w *writer) writeSegment() error {
	w.seg.reset()
	minSerial := ^uint64(0)
	w.pend.batchBlocks(func(term string, blk []blockPosting) {
		w.seg.add(term, blk)
		minSerial = min(minSerial, blk[len(blk)-1].serial)
	})
	w.segVal = w.seg.appendValue(w.segVal[:0])
	w.keyBuf = appendSegmentKey(w.keyBuf[:0], minSerial)
	if err := w.b.Set(w.keyBuf, w.segVal, nil); err != nil {
		return err
	}
	w.pendSegs++
	w.pendPostings += w.pend.bn
	w.pendKeys = append(w.pendKeys, minSerial)
	return nil
}

// needSync reports whether a batch must be synced: unless it holds only
// releases and rejections of held events (store.Unverified), which need
// not be, as the next start checks again whatever a crash took back.
func needSync(reqs []*request) bool {
	for _, r := range reqs {
		if r.op != opRelease && r.op != opReject {
			return true
		}
	}
	return false
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
		if r.op == opSave || r.op == opSubmit || r.op == opHold || r.op == opRelease {
			r.results = make([]store.SaveResult, len(r.events))
			for i := range r.results {
				r.results[i] = store.SaveResult{Outcome: store.Failed, Err: err}
			}
		}
	}
	switch r.op {
	case opSubmit, opHold, opRelease:
		if r.callback != nil {
			r.callback(r.results[0])
		}
		return
	case opReject:
		if r.rejected != nil {
			r.rejected(err)
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
	case opTombstones:
		return w.restoreTombstones(r.tombs)
	case opHold:
		res, err := w.hold(r.events[0])
		if err != nil {
			return err
		}
		r.results = []store.SaveResult{res}
	case opRelease:
		ev := r.events[0]
		res, err := w.save(ev, r)
		if err != nil {
			return err
		}
		if ev != nil {
			if err := w.b.Delete(heldKey(&ev.ID, &ev.Sig), nil); err != nil {
				return err
			}
		}
		r.results = []store.SaveResult{res}
	case opReject:
		if ev := r.events[0]; ev != nil {
			return w.b.Delete(heldKey(&ev.ID, &ev.Sig), nil)
		}
	case opFold:
		w.forceFold = true
	}
	return nil
}

// absent reports, without a pebble lookup, that no event with id is
// stored, when the filter of stored ids (Store.seen) can tell: once
// built it holds the id of every committed event (the writer adds each
// batch's ids before it applies the next batch), so an id it does not
// contain, and that the current batch does not store, is absent. False
// means "look it up". For the events the writer gets without a HasAt
// token (held events, and their release), whose lookups cost as much as
// the rest of their write.
func (w *writer) absent(id *nostr.ID) bool {
	f := w.s.seen.Load()
	return f != nil && !f.mayContain(id) && !w.recent.inBatch(id)
}

// hold keeps ev unverified (store.Unverified): a U key, and nothing else,
// so that no query, rule or tombstone sees it until it is released.
func (w *writer) hold(ev *nostr.Event) (store.SaveResult, error) {
	if err := store.CheckEvent(ev); err != nil {
		return store.SaveResult{Outcome: store.Failed, Err: err}, nil
	}
	if !w.absent(&ev.ID) {
		if ok, err := w.has(idKey(&ev.ID)); err != nil || ok {
			return store.SaveResult{Outcome: store.Duplicate}, err
		}
	}
	k := heldKey(&ev.ID, &ev.Sig)
	raw := ev.Raw
	if len(raw) == 0 {
		raw = nostr.Serialize(ev)
	}
	if err := w.b.Set(k, raw, nil); err != nil {
		return store.SaveResult{}, err
	}
	return store.SaveResult{Outcome: store.Held}, nil
}

// reader is what the writer reads through so that it sees the current
// batch's writes: the database while the batch is empty, else the batch
// made indexed. A batch starts plain, since most never need a read (a
// new event checked by the relay's pre-check is written without one),
// and an indexed batch keeps a skip list of every key written to it;
// the first read of a batch that holds writes moves them into an indexed
// batch, once, and the rest of the batch is written there.
func (w *writer) reader() (pebble.Reader, error) {
	if w.b.Indexed() {
		return w.b, nil
	}
	if w.b.Empty() {
		return w.s.db, nil
	}
	ib := w.s.db.NewIndexedBatch()
	if err := ib.Apply(w.b, nil); err != nil {
		ib.Close()
		return nil, err
	}
	w.b.Close()
	w.b = ib
	w.s.batchIndexed.Add(1)
	return ib, nil
}

// get reads key as the batch sees it (see reader). The returned value is
// a copy.
func (w *writer) get(key []byte) ([]byte, bool, error) {
	r, err := w.reader()
	if err != nil {
		return nil, false, err
	}
	return getValue(r, key)
}

func (w *writer) has(key []byte) (bool, error) {
	r, err := w.reader()
	if err != nil {
		return false, err
	}
	return hasKey(r, key)
}

// newIter iterates as the batch sees it (see reader).
func (w *writer) newIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	r, err := w.reader()
	if err != nil {
		return nil, err
	}
	return r.NewIter(o)
}

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

func closeIter(it *pebble.Iterator) error {
	err := it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

var _ io.Closer = (*pebble.Iterator)(nil)

// batchOp is one operation of a write batch (commitSorted).
type batchOp struct {
	kind       pebble.InternalKeyKind
	i          int // its place in the batch
	key, value []byte
}

// commitSorted commits the batch's operations in key order: the same
// operations, so the same result (operations on one key keep their
// order, and so their sequence numbers' order), but applied to the
// memtable as a sorted run. The memtable's skip list remembers where
// its last insertion went and starts the next one from there when the
// key lies close after it, which a batch written event by event (a
// body, an id key, then each index's key, then the next event's) never
// has: sorted, the keys of one table follow each other and the newest-
// first tables' new keys are neighbours. A batch holding anything but
// point sets and deletions is committed as it was written.
func (w *writer) commitSorted(opt *pebble.WriteOptions) error {
	if w.s.opts.unsortedCommits {
		return w.b.Commit(opt)
	}
	ops := w.ops[:0]
	defer func() {
		clear(ops) // the keys and values point into w.b's buffer
		w.ops = ops[:0]
	}()
	r := w.b.Reader()
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if kind != pebble.InternalKeyKindSet && kind != pebble.InternalKeyKindDelete {
			return w.b.Commit(opt)
		}
		ops = append(ops, batchOp{kind, len(ops), key, value})
	}
	slices.SortFunc(ops, func(a, b batchOp) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return a.i - b.i // operations on one key keep their order
	})
	sb := w.sorted
	w.sorted = nil
	if sb == nil {
		sb = w.s.db.NewBatch()
	}
	for _, op := range ops {
		var err error
		if op.kind == pebble.InternalKeyKindSet {
			err = sb.Set(op.key, op.value, nil)
		} else {
			err = sb.Delete(op.key, nil)
		}
		if err != nil {
			sb.Close()
			return err
		}
	}
	if err := sb.Commit(opt); err != nil {
		sb.Close()
		return err
	}
	// Kept for the next commit. Reset is safe whatever the batch was:
	// pebble detaches the buffer of a batch it keeps as a flushable one
	// (half a memtable or more), drops a buffer over its retention size
	// and one the commit pipeline still holds.
	sb.Reset()
	w.sorted = sb
	return nil
}
