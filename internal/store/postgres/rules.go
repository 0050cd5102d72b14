package postgres

import (
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// The storage rules (store.Store's "Storage semantics"), applied by the
// writer to one batch. The writer first takes the batch's author locks
// (see batch.locks) and reads, in the same transaction, every row the
// rules may look at (writer.read); the rules then run here, in batch
// order, over that state plus the batch's own effects, exactly like the
// pebble writer reading through its batch; writer.write turns the outcome
// into statements. The author locks are what make this safe with several
// nodes writing: every rule that relates two events relates events of
// one author (or, for NIP-62 gift wraps, of the author a wrap is
// addressed to), and a writer holds that author's lock, exclusive where
// the rule can remove or supersede something, from before it reads until
// it commits.

// batch is the valid events of one writer batch, in order.
type batch struct {
	items []*item
	// Events held unverified (store.Unverified), in the same transaction:
	// holds, rejected held copies, and released events, whose held
	// copies go.
	holds    []heldItem
	rejects  []*nostr.Event
	released []*nostr.Event
}

// item is one event of a batch and what the rules and tables need of it.
type item struct {
	ev      *nostr.Event
	res     *store.SaveResult
	raw     []byte
	dkey    []byte // address d part (dKey); nil for other kinds
	exp     *int64
	tagkeys [][]byte
	docLen  int32 // -1: nothing searchable
	terms   [][]byte
	freqs   []int16

	delIDs   []nostr.ID     // kind 5: "e" targets
	delAddrs []addrTarget   // kind 5: "a" targets the rules honour (own, replaceable or addressable)
	wrapTo   []nostr.PubKey // kind 1059: the "p" pubkeys

	// Set by the rules.
	row     *row   // the event's row when Stored
	removed []*row // what storing it removed
}

// addrTarget is an "a" deletion target of the deletion's own author.
type addrTarget struct {
	kind int
	dkey []byte
}

// locks returns the batch's author lock keys, sorted and distinct, and
// whether each is taken exclusively: the author of a replaceable or
// addressable event, of a deletion or of a request to vanish (these
// remove or supersede other events of the author), shared for other
// events' authors and for the pubkeys a gift wrap is addressed to.
func (b *batch) locks() ([]int32, []bool) {
	modes := map[int32]bool{}
	for _, it := range b.items {
		ev := it.ev
		k := authorLock(&ev.PubKey)
		excl := it.dkey != nil || ev.Kind == nostr.KindDeletion || ev.Kind == nostr.KindRequestToVanish
		modes[k] = modes[k] || excl
		for i := range it.wrapTo {
			k := authorLock(&it.wrapTo[i])
			modes[k] = modes[k] || false
		}
	}
	keys := make([]int32, 0, len(modes))
	for k := range modes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	excl := make([]bool, len(keys))
	for i, k := range keys {
		excl[i] = modes[k]
	}
	return keys, excl
}

// row is a stored event as the rules see it: one read from the database
// or one the batch stores.
type row struct {
	id        nostr.ID
	pubkey    nostr.PubKey
	kind      int
	createdAt int64
	dkey      []byte
	docLen    int32 // -1: not a search document
	inDB      bool  // read from the database (else stored by this batch)
	gone      bool  // removed by this batch
}

// state is what the rules know: the rows read (and stored) so far, the
// tombstones, and the changes to write.
type state struct {
	rows     map[nostr.ID]*row
	byAuthor map[nostr.PubKey][]*row
	wrapsTo  map[nostr.PubKey][]*row // gift wraps by the pubkeys they are addressed to
	addr     map[addrID]*row         // the stored version of each address
	tombs    map[[64]byte]struct{}   // id, deleter
	addrDel  map[addrID]int64
	vanished map[nostr.PubKey]int64

	// Changes to write.
	removeDB   []nostr.ID // database rows to remove
	newTombs   [][64]byte
	newAddrDel map[addrID]addrDelRow
	newVanish  map[nostr.PubKey]int64
	stats      statsDelta // of the events this batch stores (and keeps)
}

type addrDelRow struct {
	pk   []byte
	kind int
	dkey []byte
	ts   int64
}

func newState() *state {
	return &state{
		rows:       map[nostr.ID]*row{},
		byAuthor:   map[nostr.PubKey][]*row{},
		wrapsTo:    map[nostr.PubKey][]*row{},
		addr:       map[addrID]*row{},
		tombs:      map[[64]byte]struct{}{},
		addrDel:    map[addrID]int64{},
		vanished:   map[nostr.PubKey]int64{},
		newAddrDel: map[addrID]addrDelRow{},
		newVanish:  map[nostr.PubKey]int64{},
	}
}

func tombKey(id, deleter []byte) [64]byte {
	var k [64]byte
	copy(k[:32], id)
	copy(k[32:], deleter)
	return k
}

// scanRows reads rows of (id, pubkey, kind, created_at, dkey, doc_len),
// plus, with wraps, the pubkey the row (a gift wrap) is addressed to.
func (st *state) scanRows(rows pgx.Rows, wraps bool) error {
	var id, pk, dkey, to []byte
	var kind int32
	var createdAt int64
	var docLen *int32
	dst := []any{&id, &pk, &kind, &createdAt, &dkey, &docLen}
	if wraps {
		dst = append(dst, &to)
	}
	_, err := pgx.ForEachRow(rows, dst, func() error {
		r := st.rows[nostr.ID(id)]
		if r == nil {
			r = &row{id: nostr.ID(id), pubkey: nostr.PubKey(pk), kind: int(kind), createdAt: createdAt, inDB: true, docLen: -1}
			if dkey != nil {
				r.dkey = slices.Clone(dkey)
				// The database holds one version per address: a row with
				// a dkey is its address's stored version.
				st.addr[makeAddrID(pk, int(kind), dkey)] = r
			}
			if docLen != nil {
				r.docLen = *docLen
			}
			st.add(r)
		}
		if wraps {
			st.wrapsTo[nostr.PubKey(to)] = append(st.wrapsTo[nostr.PubKey(to)], r)
		}
		return nil
	})
	return err
}

// add makes r known.
func (st *state) add(r *row) {
	st.rows[r.id] = r
	st.byAuthor[r.pubkey] = append(st.byAuthor[r.pubkey], r)
}

// remove removes r (the changes to the search figures of database rows
// are counted from what the database reports it removed).
func (st *state) remove(r *row) {
	r.gone = true
	if r.inDB {
		st.removeDB = append(st.removeDB, r.id)
	} else if r.docLen >= 0 {
		st.stats.docs--
		st.stats.totalLen -= int64(r.docLen)
	}
	if r.dkey != nil {
		a := makeAddrID(r.pubkey[:], r.kind, r.dkey)
		if st.addr[a] == r {
			delete(st.addr, a)
		}
	}
}

// decide applies the rules to every item in order and sets its result
// (Seq and the removed ids are filled in once the batch commits).
func (st *state) decide(b *batch) {
	for _, it := range b.items {
		it.row, it.removed = nil, nil
		*it.res = st.save(it)
	}
}

// save applies one event: the outcomes are decided in the order Failed
// (done by the writer), Duplicate, Deleted, Superseded, Stored.
func (st *state) save(it *item) store.SaveResult {
	ev := it.ev
	if r := st.rows[ev.ID]; r != nil && !r.gone {
		return store.SaveResult{Outcome: store.Duplicate}
	}
	if ev.Kind != nostr.KindDeletion && ev.Kind != nostr.KindRequestToVanish {
		if _, ok := st.tombs[tombKey(ev.ID[:], ev.PubKey[:])]; ok {
			return store.SaveResult{Outcome: store.Deleted}
		}
	}
	if ts, ok := st.vanished[ev.PubKey]; ok && ev.CreatedAt <= ts {
		return store.SaveResult{Outcome: store.Deleted}
	}
	for _, pk := range it.wrapTo {
		if ts, ok := st.vanished[pk]; ok && ev.CreatedAt <= ts {
			return store.SaveResult{Outcome: store.Deleted}
		}
	}
	var a addrID
	if it.dkey != nil {
		a = makeAddrID(ev.PubKey[:], ev.Kind, it.dkey)
		if ts, ok := st.addrDel[a]; ok && ev.CreatedAt <= ts {
			return store.SaveResult{Outcome: store.Deleted}
		}
		if cur := st.addr[a]; cur != nil {
			if !store.Newer(ev.CreatedAt, &ev.ID, cur.createdAt, &cur.id) {
				return store.SaveResult{Outcome: store.Superseded}
			}
			st.remove(cur)
			it.removed = append(it.removed, cur)
		}
	}
	r := &row{id: ev.ID, pubkey: ev.PubKey, kind: ev.Kind, createdAt: ev.CreatedAt, dkey: it.dkey, docLen: it.docLen}
	st.add(r)
	for _, pk := range it.wrapTo {
		st.wrapsTo[pk] = append(st.wrapsTo[pk], r)
	}
	if it.dkey != nil {
		st.addr[a] = r
	}
	if r.docLen >= 0 {
		st.stats.docs++
		st.stats.totalLen += int64(r.docLen)
	}
	it.row = r
	switch ev.Kind {
	case nostr.KindDeletion:
		st.applyDeletion(it)
	case nostr.KindRequestToVanish:
		st.applyVanish(it)
	}
	return store.SaveResult{Outcome: store.Stored}
}

// applyDeletion applies a stored kind-5 event (NIP-09): tombstones for
// its "e" targets, removal of those by its author (but not deletions or
// requests to vanish), and its "a" targets up to its created_at.
func (st *state) applyDeletion(it *item) {
	ev := it.ev
	for i := range it.delIDs {
		id := &it.delIDs[i]
		k := tombKey(id[:], ev.PubKey[:])
		if _, ok := st.tombs[k]; !ok {
			st.tombs[k] = struct{}{}
			st.newTombs = append(st.newTombs, k)
		}
		t := st.rows[*id]
		if t == nil || t.gone || t.pubkey != ev.PubKey || t.kind == nostr.KindDeletion || t.kind == nostr.KindRequestToVanish {
			continue
		}
		st.remove(t)
		it.removed = append(it.removed, t)
	}
	for _, at := range it.delAddrs {
		a := makeAddrID(ev.PubKey[:], at.kind, at.dkey)
		if ts, ok := st.addrDel[a]; !ok || ev.CreatedAt > ts {
			st.addrDel[a] = ev.CreatedAt
			st.newAddrDel[a] = addrDelRow{pk: ev.PubKey[:], kind: at.kind, dkey: at.dkey, ts: ev.CreatedAt}
		}
		if cur := st.addr[a]; cur != nil && cur.createdAt <= ev.CreatedAt {
			st.remove(cur)
			it.removed = append(it.removed, cur)
		}
	}
}

// applyVanish applies a stored kind-62 event (NIP-62): every event of
// the author at or before it goes, except itself, and so does every gift
// wrap addressed to the author at or before it.
func (st *state) applyVanish(it *item) {
	ev := it.ev
	if ts, ok := st.vanished[ev.PubKey]; !ok || ev.CreatedAt > ts {
		st.vanished[ev.PubKey] = ev.CreatedAt
		st.newVanish[ev.PubKey] = ev.CreatedAt
	}
	for _, r := range st.byAuthor[ev.PubKey] {
		if !r.gone && r.id != ev.ID && r.createdAt <= ev.CreatedAt && st.rows[r.id] == r {
			st.remove(r)
			it.removed = append(it.removed, r)
		}
	}
	for _, r := range st.wrapsTo[ev.PubKey] {
		if !r.gone && r.kind == nostr.KindGiftWrap && r.createdAt <= ev.CreatedAt && st.rows[r.id] == r {
			st.remove(r)
			it.removed = append(it.removed, r)
		}
	}
}
