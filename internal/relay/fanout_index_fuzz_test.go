package relay

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// The live subscription index against brute force: a byte string drives
// a sequence of subscription adds and removes and of events; for each
// event, the subscriptions the fan-out would deliver to (index candidates
// that pass the exact filter match) must be exactly those a scan of every
// listed subscription finds. The values come from small sets, so filters
// and events collide often: several filters per subscription listed under
// different dimensions, the same subscription reached through several
// keys, empty filters, tags that are not single letters.

// fuzzBytes hands out the fuzz input a byte at a time (zeros once it is
// used up).
type fuzzBytes struct {
	b []byte
	i int
}

func (f *fuzzBytes) next() byte {
	if f.i >= len(f.b) {
		return 0
	}
	c := f.b[f.i]
	f.i++
	return c
}

func (f *fuzzBytes) done() bool { return f.i >= len(f.b) }

// The small universes values are drawn from.
var (
	fuzzIDs     = fuzzHashes("id", 4)
	fuzzAuthors = fuzzHashes("pk", 4)
	fuzzKinds   = []int{0, 1, 7, 30023}
	fuzzTags    = []nostr.Tag{{"e", fuzzIDs[0].Hex()}, {"e", fuzzIDs[1].Hex()}, {"p", fuzzAuthors[2].Hex()}, {"t", "x"}, {"t", "y"}, {"title", "x"}, {"t"}}
)

func fuzzHashes(seed string, n int) []nostr.ID {
	out := make([]nostr.ID, n)
	for i := range out {
		out[i][0] = byte(i + 1)
		copy(out[i][1:], seed)
	}
	return out
}

// fuzzFilter builds a filter: each condition present or not, its values a
// subset of the universe (possibly empty: the filter then matches nothing).
func fuzzFilter(in *fuzzBytes) nostr.Filter {
	var f nostr.Filter
	c := in.next()
	if c&1 != 0 {
		f.Present |= nostr.PresentIDs
		for i, m := 0, in.next(); i < len(fuzzIDs); i++ {
			if m&(1<<i) != 0 {
				f.IDs = append(f.IDs, fuzzIDs[i])
			}
		}
	}
	if c&2 != 0 {
		f.Present |= nostr.PresentAuthors
		for i, m := 0, in.next(); i < len(fuzzAuthors); i++ {
			if m&(1<<i) != 0 {
				f.Authors = append(f.Authors, nostr.PubKey(fuzzAuthors[i]))
			}
		}
	}
	if c&4 != 0 {
		f.Present |= nostr.PresentKinds
		for i, m := 0, in.next(); i < len(fuzzKinds); i++ {
			if m&(1<<i) != 0 {
				f.Kinds = append(f.Kinds, fuzzKinds[i])
			}
		}
	}
	for _, name := range []byte{'e', 'p', 't'} {
		if c&8 == 0 {
			break
		}
		m := in.next()
		if m&0x80 == 0 {
			continue
		}
		tf := nostr.TagFilter{Name: name}
		for i, t := range fuzzTags {
			if m&(1<<i) != 0 && len(t) >= 2 {
				tf.Values = append(tf.Values, t[1])
			}
		}
		f.Tags = append(f.Tags, tf)
	}
	if c&16 != 0 {
		f.Since, f.HasSince = int64(in.next()%8), true
	}
	if c&32 != 0 {
		f.Until, f.HasUntil = int64(in.next()%8), true
	}
	f.Prepare()
	return f
}

func fuzzEvent(in *fuzzBytes) *nostr.Event {
	ev := &nostr.Event{
		ID:        fuzzIDs[in.next()%byte(len(fuzzIDs))],
		PubKey:    nostr.PubKey(fuzzAuthors[in.next()%byte(len(fuzzAuthors))]),
		Kind:      fuzzKinds[in.next()%byte(len(fuzzKinds))],
		CreatedAt: int64(in.next() % 8),
	}
	for i, m := 0, in.next(); i < len(fuzzTags); i++ {
		if m&(1<<i) != 0 {
			ev.Tags = append(ev.Tags, fuzzTags[i])
		}
	}
	return ev
}

// checkIndex runs the operations data encodes and fails on the first
// event whose deliveries differ from brute force.
func checkIndex(t *testing.T, data []byte) {
	in := &fuzzBytes{b: data}
	ix := newIndex()
	ix.shrinkMin = 2 // its maps are made again as they shrink, within the run
	var listed []*sub
	stamp := uint64(0)
	for step := 0; !in.done() && step < 400; step++ {
		switch op := in.next() % 8; {
		case op < 3: // add a subscription with 1-3 filters
			n := 1 + int(in.next()%3)
			sb := &sub{}
			for i := 0; i < n; i++ {
				sb.filters = append(sb.filters, fuzzFilter(in))
			}
			ix.add(sb)
			listed = append(listed, sb)
		case op < 4 && len(listed) > 0: // remove one
			i := int(in.next()) % len(listed)
			ix.remove(listed[i])
			if in.next()&1 == 0 {
				ix.remove(listed[i]) // removal is idempotent
			}
			listed = append(listed[:i], listed[i+1:]...)
		default: // an event
			ev := fuzzEvent(in)
			stamp++
			got := map[*sub]bool{}
			ix.candidates(ev, func(sb *sub) {
				if sb.stamp == stamp {
					return
				}
				sb.stamp = stamp
				if nostr.MatchesAny(sb.filters, ev) {
					got[sb] = true
				}
			})
			for _, sb := range listed {
				if want := nostr.MatchesAny(sb.filters, ev); want != got[sb] {
					t.Fatalf("step %d: event %s: subscription %s: index delivers %v, brute force %v",
						step, describeEvent(ev), describeFilters(sb.filters), got[sb], want)
				}
				delete(got, sb)
			}
			for sb := range got {
				t.Fatalf("step %d: the index delivers to a removed subscription %s", step, describeFilters(sb.filters))
			}
		}
		if c := ix.count(); c != len(listed) {
			t.Fatalf("step %d: index counts %d subscriptions, %d listed", step, c, len(listed))
		}
	}
	for _, sb := range listed {
		ix.remove(sb)
	}
	if len(ix.byID)+len(ix.byAuthor)+len(ix.byKind)+len(ix.byTag)+len(ix.all.entries) != 0 || ix.count() != 0 {
		t.Fatalf("index not empty after removing every subscription: %d ids, %d authors, %d kinds, %d tags, %d all",
			len(ix.byID), len(ix.byAuthor), len(ix.byKind), len(ix.byTag), len(ix.all.entries))
	}
}

func describeEvent(ev *nostr.Event) string {
	return fmt.Sprintf("{id %x pk %x kind %d at %d tags %v}", ev.ID[0], ev.PubKey[0], ev.Kind, ev.CreatedAt, ev.Tags)
}

func describeFilters(fs []nostr.Filter) string {
	s := ""
	for _, f := range fs {
		s += fmt.Sprintf("{ids %d authors %d kinds %v tags %v since %v/%d until %v/%d present %b}",
			len(f.IDs), len(f.Authors), f.Kinds, f.Tags, f.HasSince, f.Since, f.HasUntil, f.Until, f.Present)
	}
	return s
}

func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 5, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 7, 3, 15, 3, 0x81, 0x82, 0x88, 1, 5, 5, 1, 1, 2, 0xff, 3, 0, 6, 2, 1, 3, 3, 0x1f})
	f.Add([]byte{1, 2, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 9, 4, 0, 2, 3, 7, 0x7f, 3, 0, 0, 5, 0, 0, 0, 0, 0})
	f.Add([]byte("\x00\x01\x08\xf8\x00\x00\x02\x04\x00\x00\x05\x00\x03\x00\x00\x01\x07\x00\x05\x01\x02\x00\x01\x10"))
	f.Fuzz(checkIndex)
}

// TestIndexRandom runs the differential check over many pseudo-random
// inputs, so that the plain test run covers more than the seed corpus.
func TestIndexRandom(t *testing.T) {
	state := uint64(0x9e3779b97f4a7c15)
	for n := 0; n < 300; n++ {
		data := make([]byte, 600)
		for i := range data {
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			data[i] = byte(state)
		}
		checkIndex(t, data)
	}
}

// TestIndexShrinks: a map that held a flood of keys is made again once it
// is down to a quarter of its peak (Go's maps keep their largest table),
// and the subscriptions left still match: a flood of subscriptions does
// not hold the index's memory after they close.
func TestIndexShrinks(t *testing.T) {
	ix := newIndex()
	const n = 5 * shrinkAt
	subs := make([]*sub, n)
	for i := range subs {
		var pk nostr.PubKey
		binary.BigEndian.PutUint64(pk[:], uint64(i))
		subs[i] = &sub{filters: []nostr.Filter{{Authors: []nostr.PubKey{pk}}}}
		ix.add(subs[i])
	}
	if ix.peakAuthor != n {
		t.Fatalf("peak %d after %d authors", ix.peakAuthor, n)
	}
	before := ix.byAuthor
	for _, sb := range subs[:n*3/4-1] {
		ix.remove(sb)
	}
	if reflect.ValueOf(ix.byAuthor).UnsafePointer() != reflect.ValueOf(before).UnsafePointer() {
		t.Fatal("the map was made again above a quarter of its peak")
	}
	ix.remove(subs[n*3/4-1])
	if reflect.ValueOf(ix.byAuthor).UnsafePointer() == reflect.ValueOf(before).UnsafePointer() || ix.peakAuthor != len(ix.byAuthor) || len(ix.byAuthor) != n/4 {
		t.Fatalf("at a quarter of its peak: %d keys, peak %d, made again %v", len(ix.byAuthor), ix.peakAuthor,
			reflect.ValueOf(ix.byAuthor).UnsafePointer() != reflect.ValueOf(before).UnsafePointer())
	}
	for _, sb := range subs[n*3/4:] {
		got := 0
		ix.candidates(&nostr.Event{PubKey: sb.filters[0].Authors[0]}, func(s *sub) {
			if s != sb {
				t.Fatalf("another subscription for its author")
			}
			got++
		})
		if got != 1 {
			t.Fatalf("a subscription left: %d candidates for its author, want 1", got)
		}
	}
}
