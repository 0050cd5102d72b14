package nostr

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// TagFilter is one "#x" condition of a filter: the event must carry a tag
// named Name (a single letter, NIP-01) whose value is one of Values.
type TagFilter struct {
	Name   byte
	Values []string
}

// Filter is one NIP-01 filter. The zero Filter matches every event.
//
// Conditions are AND'ed; values inside one condition are OR'ed. A present
// but empty list (for example "kinds":[]) matches nothing; Present records
// which lists were present so that the distinction survives parsing.
type Filter struct {
	IDs     []ID
	Authors []PubKey
	Kinds   []int
	Tags    []TagFilter
	Since   int64 // created_at >= Since; meaningful only when HasSince
	Until   int64 // created_at <= Until; meaningful only when HasUntil
	Limit   int   // meaningful only when HasLimit
	Search  string

	HasSince bool
	HasUntil bool
	HasLimit bool

	// Present has a bit set for each list that appeared in the JSON
	// (PresentIDs, PresentAuthors, PresentKinds); tag lists are present
	// when they appear in Tags.
	Present uint8

	// sorted: Prepare sorted the lists, so Matches may binary-search them.
	sorted bool
}

// sortedScan is the list length from which Matches binary-searches a
// Prepared filter's lists instead of scanning them.
const sortedScan = 8

// Prepare sorts the filter's lists (which does not change what it
// matches) so that Matches can binary-search long ones: a follow list of
// hundreds of authors is then matched in a few comparisons. It modifies
// the filter's slices in place; call it before sharing the filter.
func (f *Filter) Prepare() {
	slices.SortFunc(f.IDs, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	slices.SortFunc(f.Authors, func(a, b PubKey) int { return bytes.Compare(a[:], b[:]) })
	slices.Sort(f.Kinds)
	for i := range f.Tags {
		slices.Sort(f.Tags[i].Values)
	}
	f.sorted = true
}

// Bits of Filter.Present.
const (
	PresentIDs uint8 = 1 << iota
	PresentAuthors
	PresentKinds
)

// HasIDs reports whether the filter constrains ids.
func (f *Filter) HasIDs() bool { return f.Present&PresentIDs != 0 || len(f.IDs) > 0 }

// HasAuthors reports whether the filter constrains authors.
func (f *Filter) HasAuthors() bool { return f.Present&PresentAuthors != 0 || len(f.Authors) > 0 }

// HasKinds reports whether the filter constrains kinds.
func (f *Filter) HasKinds() bool { return f.Present&PresentKinds != 0 || len(f.Kinds) > 0 }

// Empty reports whether the filter can match no event at all: a present
// but empty list, an empty tag value list, or since > until.
func (f *Filter) Empty() bool {
	if (f.Present&PresentIDs != 0 && len(f.IDs) == 0) ||
		(f.Present&PresentAuthors != 0 && len(f.Authors) == 0) ||
		(f.Present&PresentKinds != 0 && len(f.Kinds) == 0) {
		return true
	}
	for i := range f.Tags {
		if len(f.Tags[i].Values) == 0 {
			return true
		}
	}
	if f.HasSince && f.HasUntil && f.Since > f.Until {
		return true
	}
	return false
}

// Matches reports whether ev satisfies every condition of the filter except
// Limit and Search (search relevance is the search index's business; a
// filter with Search matches only what the search index returns).
func (f *Filter) Matches(ev *Event) bool {
	if f.HasSince && ev.CreatedAt < f.Since {
		return false
	}
	if f.HasUntil && ev.CreatedAt > f.Until {
		return false
	}
	if f.HasKinds() && !containsInt(f.Kinds, ev.Kind) {
		return false
	}
	if f.sorted {
		if f.HasAuthors() && !sortedHas(f.Authors, &ev.PubKey) {
			return false
		}
		if f.HasIDs() && !sortedHas(f.IDs, &ev.ID) {
			return false
		}
	} else {
		if f.HasAuthors() && !containsPubKey(f.Authors, &ev.PubKey) {
			return false
		}
		if f.HasIDs() && !containsID(f.IDs, &ev.ID) {
			return false
		}
	}
	for i := range f.Tags {
		if !ev.hasTagValue(f.Tags[i].Name, f.Tags[i].Values, f.sorted) {
			return false
		}
	}
	return true
}

// MatchesAny reports whether ev matches at least one of filters.
func MatchesAny(filters []Filter, ev *Event) bool {
	for i := range filters {
		if filters[i].Matches(ev) {
			return true
		}
	}
	return false
}

// hasTagValue reports whether the event has a tag named name (one letter)
// whose value is in values.
func (ev *Event) hasTagValue(name byte, values []string, sorted bool) bool {
	bin := sorted && len(values) >= sortedScan
	for _, t := range ev.Tags {
		if len(t) < 2 || len(t[0]) != 1 || t[0][0] != name {
			continue
		}
		v := t[1]
		if bin {
			if _, ok := slices.BinarySearch(values, v); ok {
				return true
			}
			continue
		}
		for _, want := range values {
			if v == want {
				return true
			}
		}
	}
	return false
}

// sortedHas reports whether the sorted list holds v, scanning short lists
// and binary-searching long ones.
func sortedHas[K ~[32]byte](list []K, v *K) bool {
	if len(list) < sortedScan {
		for i := range list {
			if list[i] == *v {
				return true
			}
		}
		return false
	}
	// A binary search that decides on the first 8 bytes (as a big-endian
	// integer, which orders like the bytes) and compares the rest only on
	// a tie: slices.BinarySearchFunc with bytes.Compare copied both
	// 32-byte keys and called out for every step.
	vb := [32]byte(*v)
	k := binary.BigEndian.Uint64(vb[:8])
	lo, hi := 0, len(list)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		e := [32]byte(list[m])
		c := binary.BigEndian.Uint64(e[:8])
		if c < k || c == k && bytes.Compare(e[8:], vb[8:]) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(list) && list[lo] == *v
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func containsPubKey(list []PubKey, v *PubKey) bool {
	for i := range list {
		if list[i] == *v {
			return true
		}
	}
	return false
}

func containsID(list []ID, v *ID) bool {
	for i := range list {
		if list[i] == *v {
			return true
		}
	}
	return false
}
