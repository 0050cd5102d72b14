package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// Planner limits.
const (
	// maxPairs is the most (author, kind) streams a filter gets; above it
	// the planner streams per author and checks the kind from the meta.
	maxPairs = 4096
	// manyStreams is the number of per-author streams above which a
	// filter with a limit first scans the kind (or created_at) index with
	// an author set, for a budget of scanBudgetPerResult entries per
	// result wanted (between minScanBudget and maxScanBudget), before
	// seeking every author.
	manyStreams         = 64
	scanBudgetPerResult = 8
	minScanBudget       = 256
	maxScanBudget       = 4096
	// minChunk and maxChunk bound how many entries a source reads per
	// seek; the chunk doubles on each refill.
	minChunk     = 4
	maxChunk     = 1024
	defaultChunk = 64
	// maxInitialEntries bounds the entries a filter's sources buffer
	// before any of them is refilled.
	maxInitialEntries = 16384
)

// active reports whether a filter can match anything; for Query a limit
// of 0 or less also makes it inactive.
func active(f *nostr.Filter, forQuery bool) bool {
	if f.Empty() || f.Search != "" {
		return false
	}
	return !(forQuery && f.HasLimit && f.Limit <= 0)
}

// tagRank orders tag names by how selective their values tend to be:
// ids and addresses first, then pubkeys, then the rest.
func tagRank(name byte) int {
	switch name {
	case 'e', 'a', 'd', 'E', 'A', 'q':
		return 0
	case 'p', 'P':
		return 1
	}
	return 2
}

// bestTag returns the index in f.Tags of the tag condition to scan: the
// one with fewest values, then the most selective name.
func bestTag(f *nostr.Filter) int {
	best := 0
	for i := 1; i < len(f.Tags); i++ {
		a, b := &f.Tags[i], &f.Tags[best]
		if len(a.Values) < len(b.Values) || (len(a.Values) == len(b.Values) && tagRank(a.Name) < tagRank(b.Name)) {
			best = i
		}
	}
	return best
}

// plan builds the stream for one filter, or returns nil when the filter
// cannot match anything. See docs/storage.md, "Planner".
func (q *query) plan(f *nostr.Filter, forQuery, wantBody bool) (*filterStream, error) {
	if !active(f, forQuery) {
		return nil, nil
	}
	since, until := int64(0), int64(nostr.MaxTimestamp)
	if f.HasSince && f.Since > since {
		since = f.Since
	}
	if f.HasUntil && f.Until < until {
		until = f.Until
	}
	if since > until {
		return nil, nil
	}
	fs := &filterStream{q: q, f: f, left: -1, since: since, until: until, wantBody: wantBody, budget: -1}
	if forQuery && f.HasLimit {
		fs.left = f.Limit
	}
	var kinds []int
	if f.HasKinds() {
		kinds = make([]int, 0, len(f.Kinds))
		for _, k := range f.Kinds {
			if 0 <= k && k <= nostr.MaxKind {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) == 0 {
			return nil, nil
		}
		slices.Sort(kinds)
		kinds = slices.Compact(kinds)
	}
	authors := f.Authors // may hold duplicates: only checked against
	hasAuthors := f.HasAuthors()
	var prefixes [][]byte
	tagIdx := -1
	if len(f.Tags) > 0 {
		tagIdx = bestTag(f)
		if hasAuthors && tagRank(f.Tags[tagIdx].Name) != 0 {
			tagIdx = -1 // authors are the better index
		}
	}
	switch {
	case f.HasIDs():
		fs.plannedIdx = pfxID
		src, err := q.idSource(f.IDs)
		if err != nil {
			return nil, err
		}
		fs.srcs = []*source{src}
		fs.checkTime = true
		fs.kinds = kinds
		fs.setAuthors(hasAuthors, authors)
		fs.parseTags = len(f.Tags) > 0
	case tagIdx >= 0:
		fs.plannedIdx = pfxTag
		tf := &f.Tags[tagIdx]
		exact := true
		for _, v := range tf.Values {
			p, ex := tagPrefix(tf.Name, v)
			exact = exact && ex
			if !containsBytes(prefixes, p) {
				prefixes = append(prefixes, p)
			}
		}
		fs.kinds = kinds
		fs.setAuthors(hasAuthors, authors)
		fs.parseTags = len(f.Tags) > 1 || !exact
	case hasAuthors:
		fs.parseTags = len(f.Tags) > 0
		fs.plannedIdx = pfxAuthor
		streams := len(authors)
		if kinds != nil && len(authors)*len(kinds) <= maxPairs {
			fs.plannedIdx = pfxAuthKind
			streams *= len(kinds)
		} else {
			fs.kinds = kinds
		}
		if fs.left > 0 && streams > manyStreams {
			// Many authors: scan the newest events of the kinds first,
			// with the authors as a set; most follow lists find their
			// page there. The per-author streams are built only if the
			// scan gives up (switchToLater).
			fs.budget = min(max(scanBudgetPerResult*fs.left, minScanBudget), maxScanBudget)
			fs.laterKinds = kinds
			fs.setAuthors(true, authors)
			if kinds != nil {
				for _, k := range kinds {
					prefixes = append(prefixes, appendU16([]byte{pfxKind}, uint16(k)))
				}
				fs.kinds = nil // guaranteed by the K streams
			} else {
				prefixes = [][]byte{{pfxCreated}}
			}
		} else {
			prefixes = authorPrefixes(authors, fs.plannedIdx, kinds)
		}
	case kinds != nil:
		fs.plannedIdx = pfxKind
		for _, k := range kinds {
			prefixes = append(prefixes, appendU16([]byte{pfxKind}, uint16(k)))
		}
		fs.parseTags = len(f.Tags) > 0
	default:
		fs.plannedIdx = pfxCreated
		prefixes = [][]byte{{pfxCreated}}
		fs.parseTags = len(f.Tags) > 0
	}
	fs.needsBody = fs.parseTags || fs.authors != nil
	if prefixes != nil {
		chunk := defaultChunk
		if fs.left > 0 {
			chunk = min(max(fs.left/len(prefixes)+1, minChunk), maxChunk)
		}
		fs.srcs = q.newSources(fs.srcs, prefixes, nil, until, since, chunk)
	}
	return fs, nil
}

// newSources appends to dst one range source per prefix, covering
// [prefix inv(until), prefix inv(since)+1), or, when after is set,
// starting just after the entry after. Keys and initial buffers come from
// two allocations shared by all the sources.
func (q *query) newSources(dst []*source, prefixes [][]byte, after *entry, until, since int64, chunk int) []*source {
	// Bound the initial buffers of a query with many streams and a large
	// limit (they grow per stream as needed).
	chunk = max(minChunk, min(chunk, maxInitialEntries/len(prefixes)))
	size := 0
	for _, p := range prefixes {
		size += 2*len(p) + 8 + tailLen + 9
	}
	arena := make([]byte, 0, size)
	srcs := make([]source, len(prefixes))
	slab := getEntries(len(prefixes) * chunk)
	q.slabs = append(q.slabs, slab)
	for i, p := range prefixes {
		start := len(arena)
		arena = append(arena, p...)
		if after != nil {
			arena = append(appendTail(arena, after.createdAt, &after.id), 0)
		} else {
			arena = appendU64(arena, inv(until))
		}
		lo := arena[start:len(arena):len(arena)]
		start = len(arena)
		arena = appendU64(append(arena, p...), inv(since))
		hi := arena[start:len(arena):len(arena)]
		// hi = prefixEnd(hi), in place.
		for j := len(hi) - 1; j >= 0; j-- {
			hi[j]++
			if hi[j] != 0 {
				hi = hi[: j+1 : j+1]
				break
			}
			if j == 0 {
				hi = nil
			}
		}
		srcs[i] = source{q: q, lo: lo, hi: hi, chunk: chunk, buf: slab[i*chunk : i*chunk : (i+1)*chunk], slab: true}
		dst = append(dst, &srcs[i])
		q.srcs = append(q.srcs, &srcs[i])
	}
	return dst
}

// setAuthors makes the author a post-filter (when has): the first 8 bytes
// from the meta, then the whole key from the body.
func (fs *filterStream) setAuthors(has bool, authors []nostr.PubKey) {
	if !has {
		return
	}
	fs.authors = authors
	if fs.authors == nil {
		fs.authors = []nostr.PubKey{} // present but empty: Empty() already refused it
	}
	if len(authors) > 16 {
		fs.authorSet = make(map[[8]byte]int32, len(authors))
		for i := range authors {
			k := [8]byte(authors[i][:8])
			if j, ok := fs.authorSet[k]; ok && j >= 0 && authors[j] != authors[i] {
				fs.authorSet[k] = -1 // two authors share the prefix: scan
			} else if !ok {
				fs.authorSet[k] = int32(i)
			}
		}
	}
}

// authorPrefixes returns the stream prefixes of authors (sorted and
// deduplicated, so that the seeks move forward through the index):
// P pubkey, or Q pubkey kind for each kind when table is pfxAuthKind.
func authorPrefixes(authors []nostr.PubKey, table byte, kinds []int) [][]byte {
	authors = slices.Clone(authors)
	slices.SortFunc(authors, func(a, b nostr.PubKey) int {
		x, y := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
		return bytes.Compare(a[8:], b[8:])
	})
	authors = slices.Compact(authors)
	if table == pfxAuthor {
		kinds = nil
	}
	n := len(authors) * max(len(kinds), 1)
	arena := make([]byte, 0, n*35)
	prefixes := make([][]byte, 0, n)
	for i := range authors {
		if table == pfxAuthor {
			start := len(arena)
			arena = append(append(arena, pfxAuthor), authors[i][:]...)
			prefixes = append(prefixes, arena[start:len(arena):len(arena)])
			continue
		}
		for _, k := range kinds {
			start := len(arena)
			arena = appendU16(append(append(arena, pfxAuthKind), authors[i][:]...), uint16(k))
			prefixes = append(prefixes, arena[start:len(arena):len(arena)])
		}
	}
	return prefixes
}

func containsBytes(list [][]byte, b []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, b) {
			return true
		}
	}
	return false
}

// idSource looks the ids up and returns them as a sorted list source.
func (q *query) idSource(ids []nostr.ID) (*source, error) {
	src := &source{q: q, done: true}
	for i := range ids {
		q.keyBuf = append(append(q.keyBuf[:0], pfxID), ids[i][:]...)
		v, closer, err := q.snap.Get(q.keyBuf)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ts, m, ok := decodeIDValue(v)
		closer.Close()
		if !ok {
			return nil, fmt.Errorf("%w: id value for %x", errCorrupt, ids[i])
		}
		src.buf = append(src.buf, entry{createdAt: ts, id: ids[i], m: m})
	}
	slices.SortFunc(src.buf, func(a, b entry) int {
		if a.before(&b) {
			return -1
		}
		if b.before(&a) {
			return 1
		}
		return 0
	})
	return src, nil
}
