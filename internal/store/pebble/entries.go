package pebble

import (
	"bytes"
	"fmt"

	"github.com/petrel-relay/petrel/internal/nostr"
)

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
	w.eventsDelta++
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
// Postings go to w.pend, as the batch's, and are written at the end of
// the batch (writePostings). Removing an event of this batch drops its
// postings from there;
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
				w.pend.drop(doc.Terms[i].Text, serial)
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
		w.pend.add(t.Text, serial, p)
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
	if err := w.b.Delete(bodyKey(serial), nil); err != nil {
		return err
	}
	if err := w.b.Delete(idKey(&ev.ID), nil); err != nil {
		return err
	}
	w.eventsDelta--
	w.keys.build(ev)
	for _, k := range w.keys.all() {
		if err := w.b.Delete(k, nil); err != nil {
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
				if err := w.b.Delete(ak, nil); err != nil {
					return err
				}
			}
		}
	}
	if exp, ok := ev.Expiration(); ok {
		if err := w.b.Delete(expiryKey(exp, serial), nil); err != nil {
			return err
		}
	}
	return w.index(ev, &meta{serial: serial}, true)
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
