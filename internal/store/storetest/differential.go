package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// SeedEnv names the environment variable that replays the differential
// test with one seed: PETREL_STORETEST_SEED=1234 go test -run Differential.
const SeedEnv = "PETREL_STORETEST_SEED"

// testDifferential saves thousands of random events in random batches to
// the store and to the model, and compares the outcomes, then runs
// thousands of random queries on both. The store is reused across seeds:
// each seed's events live in their own part of the key space (authors and
// tags are seed-specific), so earlier seeds do not disturb later ones.
func testDifferential(t *testing.T, st store.Store) {
	seeds := []uint64{1, 2, uint64(time.Now().UnixNano())}
	events, queries := 3000, 1500
	if testing.Short() {
		seeds, events, queries = seeds[2:], 800, 400
	}
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seeds = []uint64{v}
	}
	for i, seed := range seeds {
		if i > 0 {
			// Later seeds need a fresh state: delete everything the
			// previous one stored (tombstones stay, but they name the
			// previous seed's authors and ids).
			clearStore(t, st)
		}
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			d := &differ{t: t, st: st, m: NewModel(), g: newGen(seed)}
			d.g.search = SupportsSearch(st)
			d.run(events, queries)
		})
		if !ok {
			t.Logf("replay with %s=%d", SeedEnv, seed)
			return
		}
	}
}

func clearStore(t *testing.T, st store.Store) {
	ctx := context.Background()
	items, err := st.Items(ctx, []nostr.Filter{{}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]nostr.ID, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	if _, err := st.Delete(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PurgeExpired(ctx, time.Now().Unix()+1<<40); err != nil {
		t.Fatal(err)
	}
}

// gen draws random events and filters from a small vocabulary, so that
// filters hit often and created_at ties are frequent.
type gen struct {
	rng     *rand.Rand
	seed    uint64
	authors []nostr.PubKey
	absent  []nostr.PubKey // authors with no events
	ids     []nostr.ID     // ids of generated events (stored or not), plus a few unknown
	evs     []*nostr.Event
	words   []string
	text    []string // content words, for search
	search  bool     // draw search filters
	dvals   []string
	longs   []string
	now     int64
}

func newGen(seed uint64) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), seed: seed, now: time.Now().Unix()}
	for i := 0; i < 6; i++ {
		// Random authors: each seed has its own, even in a shared store.
		g.authors = append(g.authors, nostr.PubKey(IDWithPrefix(g.rng, byte(i))))
	}
	s := strconv.FormatUint(seed, 36)
	g.words = []string{"nostr" + s, "go" + s, "Go" + s, "" + s, "x" + s}
	g.text = []string{"alpha" + s, "Beta" + s, "gamma" + s, "delta" + s, "eps" + s, "nostr" + s}
	g.dvals = []string{"", "a" + s, "b" + s, "c" + s}
	g.longs = []string{strings.Repeat("long"+s, 40), strings.Repeat("long"+s, 40) + "!"}
	for i := 0; i < 3; i++ {
		g.ids = append(g.ids, IDWithPrefix(g.rng, byte(i)))
	}
	for i := 0; i < 70; i++ {
		g.absent = append(g.absent, nostr.PubKey(IDWithPrefix(g.rng, byte(i))))
	}
	return g
}

var diffKinds = []int{1, 1, 1, 1, 7, 7, 1111, 0, 3, 10002, 30023, 30023, 30000, 5, 5, 62, 1059}

func (g *gen) pick(n int) int { return g.rng.IntN(n) }

func (g *gen) author() nostr.PubKey { return g.authors[g.pick(len(g.authors))] }

func (g *gen) knownID() nostr.ID { return g.ids[g.pick(len(g.ids))] }

func (g *gen) tagValue(name string) string {
	switch name {
	case "p":
		return g.author().Hex()
	case "e":
		return g.knownID().Hex()
	case "d":
		return g.dvals[g.pick(len(g.dvals))]
	case "r":
		return g.longs[g.pick(len(g.longs))]
	case "a":
		return ATag([]int{30023, 30000, 10002}[g.pick(3)], g.author(), g.dvals[g.pick(len(g.dvals))])
	}
	return g.words[g.pick(len(g.words))]
}

var diffTagNames = []string{"p", "p", "e", "e", "t", "t", "d", "r", "a", "T"}

// event draws a new random event, or (sometimes) one drawn before.
func (g *gen) event() *nostr.Event {
	if len(g.evs) > 0 && g.pick(12) == 0 {
		return g.evs[g.pick(len(g.evs))]
	}
	kind := diffKinds[g.pick(len(diffKinds))]
	pk := g.author()
	created := int64(BaseTime + g.pick(40))
	var tags nostr.Tags
	for n := g.pick(4); n > 0; n-- {
		name := diffTagNames[g.pick(len(diffTagNames))]
		tags = append(tags, nostr.Tag{name, g.tagValue(name)})
	}
	switch g.pick(25) {
	case 0:
		tags = append(tags, nostr.Tag{"title", "multi"}, nostr.Tag{"t"})
	case 1, 2:
		tags = append(tags, nostr.Tag{"expiration", strconv.FormatInt(g.now-1000-int64(g.pick(1000)), 10)})
	case 3, 4:
		tags = append(tags, nostr.Tag{"expiration", strconv.FormatInt(g.now+1_000_000+int64(g.pick(1000)), 10)})
	}
	switch kind {
	case 30023, 30000:
		if g.pick(4) > 0 {
			tags = append(nostr.Tags{{"d", g.dvals[g.pick(len(g.dvals))]}}, tags...)
		}
	case 5:
		tags = nil
		for n := 1 + g.pick(3); n > 0; n-- {
			switch g.pick(6) {
			case 0, 1, 2:
				// An event by the same author, usually.
				if len(g.evs) > 0 {
					t := g.evs[g.pick(len(g.evs))]
					for try := 0; try < 3 && t.PubKey != pk; try++ {
						t = g.evs[g.pick(len(g.evs))]
					}
					tags = append(tags, nostr.Tag{"e", t.ID.Hex()})
				}
			case 3:
				tags = append(tags, nostr.Tag{"e", g.knownID().Hex()})
			case 4:
				tags = append(tags, nostr.Tag{"a", ATag([]int{30023, 30000, 10002, 0}[g.pick(4)], pk, g.dvals[g.pick(len(g.dvals))])})
			case 5:
				tags = append(tags, nostr.Tag{"a", g.tagValue("a")})
			}
		}
	case 1059:
		// A gift wrap: addressed to one or two authors (NIP-62 removes it
		// when one of them vanishes).
		tags = nostr.Tags{{"p", g.author().Hex()}}
		if g.pick(3) == 0 {
			tags = append(tags, nostr.Tag{"p", g.author().Hex()})
		}
	case 62:
		if g.pick(6) > 0 {
			return g.event() // keep vanishes rare, and early
		}
		created = int64(BaseTime + g.pick(8))
	}
	if g.pick(100) == 0 {
		kind = 20001 // refused
	}
	ev := NewEvent(g.rng, pk, kind, created, tags, g.content(kind, &tags))
	g.evs = append(g.evs, ev)
	g.ids = append(g.ids, ev.ID)
	return ev
}

// content draws an event's content: a few words (for search), as JSON for
// a profile; sometimes adds a title tag.
func (g *gen) content(kind int, tags *nostr.Tags) string {
	var words []string
	for n := g.pick(5); n > 0; n-- {
		words = append(words, g.text[g.pick(len(g.text))])
	}
	if g.pick(8) == 0 {
		*tags = append(*tags, nostr.Tag{"title", g.text[g.pick(len(g.text))]})
	}
	switch kind {
	case 0:
		return `{"name":"` + strings.Join(words, " ") + `","about":"c"}`
	case 5, 62:
		return ""
	}
	return "c " + strings.Join(words, []string{" ", ", ", "! ", " - "}[g.pick(4)])
}

// searchString draws a search string: one or two content words, sometimes
// with an extension or a word nobody uses.
func (g *gen) searchString() string {
	q := g.text[g.pick(len(g.text))]
	if g.pick(3) == 0 {
		q += " " + strings.ToUpper(g.text[g.pick(len(g.text))])
	}
	switch g.pick(8) {
	case 0:
		q += " language:en"
	case 1:
		q += " nobody" + strconv.FormatUint(g.seed, 36)
	case 2:
		q = g.words[g.pick(len(g.words))] // a hashtag value
	}
	return q
}

// filter draws a random filter.
func (g *gen) filter() nostr.Filter {
	var f nostr.Filter
	if g.pick(7) == 0 {
		for n := 1 + g.pick(4); n > 0; n-- {
			f.IDs = append(f.IDs, g.knownID())
		}
	}
	if g.pick(5) < 2 {
		for n := 1 + g.pick(3); n > 0; n-- {
			f.Authors = append(f.Authors, g.author())
		}
		if g.pick(6) == 0 {
			// A long follow list, mostly of authors with no events.
			f.Authors = append(f.Authors, g.absent...)
		}
	}
	if g.pick(5) < 2 {
		for n := 1 + g.pick(3); n > 0; n-- {
			f.Kinds = append(f.Kinds, append(diffKinds, 9, 20000)[g.pick(len(diffKinds)+2)])
		}
	}
	if g.pick(3) == 0 {
		for n := 1 + g.pick(2); n > 0; n-- {
			name := diffTagNames[g.pick(len(diffTagNames))]
			tf := nostr.TagFilter{Name: name[0]}
			for m := 1 + g.pick(3); m > 0; m-- {
				tf.Values = append(tf.Values, g.tagValue(name))
			}
			f.Tags = append(f.Tags, tf)
		}
	}
	if g.pick(4) == 0 {
		f.Since, f.HasSince = int64(BaseTime-3+g.pick(45)), true
	}
	if g.pick(4) == 0 {
		f.Until, f.HasUntil = int64(BaseTime-3+g.pick(45)), true
	}
	if g.pick(2) == 0 {
		f.Limit, f.HasLimit = g.pick(30), true
	}
	if g.pick(50) == 0 {
		f.Present |= []uint8{nostr.PresentIDs, nostr.PresentAuthors, nostr.PresentKinds}[g.pick(3)]
	}
	if g.search && g.pick(6) == 0 {
		f.Search = g.searchString()
	}
	return f
}

type differ struct {
	t  *testing.T
	st store.Store
	m  *Model
	g  *gen

	outcomes  [store.Failed + 1]int
	removed   int
	searches  int
	nonEmpty  int
	returned  int
	queryRuns int
}

func (d *differ) run(events, queries int) {
	ctx := context.Background()
	saved, q := 0, 0
	for saved < events {
		n := 1 + d.g.pick(40)
		if d.g.pick(4) == 0 {
			n = 1
		}
		batch := make([]*nostr.Event, n)
		for i := range batch {
			batch[i] = d.g.event()
		}
		saved += n
		got, err := d.st.Save(ctx, batch)
		if err != nil {
			d.t.Fatalf("Save: %v", err)
		}
		want, _ := d.m.Save(ctx, batch)
		for i := range batch {
			d.outcomes[want[i].Outcome]++
			d.removed += len(want[i].Removed)
			if !sameResult(got[i], want[i]) {
				d.t.Fatalf("after %d events, event %d of batch (kind %d, created_at %d, id %s): store %v %v %v, model %v %v %v",
					saved, i, batch[i].Kind, batch[i].CreatedAt, batch[i].ID.Hex()[:8],
					got[i].Outcome, len(got[i].Removed), got[i].Err, want[i].Outcome, len(want[i].Removed), want[i].Err)
			}
		}
		// Purge on both, so that a background purge in the store can
		// never make them differ.
		now := time.Now().Unix()
		if _, err := d.st.PurgeExpired(ctx, now); err != nil {
			d.t.Fatal(err)
		}
		d.m.PurgeExpired(ctx, now)
		if d.g.pick(30) == 0 {
			ids := []nostr.ID{d.g.knownID(), d.g.knownID()}
			n1, err := d.st.Delete(ctx, ids)
			if err != nil {
				d.t.Fatal(err)
			}
			if n2, _ := d.m.Delete(ctx, ids); n1 != n2 {
				d.t.Fatalf("Delete = %d, model %d", n1, n2)
			}
		}
		// Queries as the state grows.
		for target := queries * saved / events; q < target; q++ {
			d.compare()
		}
	}
	for ; q < queries; q++ {
		d.compare()
	}
	d.t.Logf("outcomes stored/dup/superseded/deleted/failed %v, removed %d; queries %d (with search %d), non-empty %d, records %d",
		d.outcomes[1:], d.removed, d.queryRuns, d.searches, d.nonEmpty, d.returned)
	for i := 0; i < 200; i++ {
		id := d.g.knownID()
		a, err := d.st.Has(ctx, id)
		if err != nil {
			d.t.Fatal(err)
		}
		if b, _ := d.m.Has(ctx, id); a != b {
			d.t.Fatalf("Has(%s) = %v, model %v", id.Hex()[:8], a, b)
		}
	}
}

func sameResult(a, b store.SaveResult) bool {
	if a.Outcome != b.Outcome {
		return false
	}
	if a.Outcome == store.Failed {
		return errors.Is(a.Err, store.ErrEphemeral) == errors.Is(b.Err, store.ErrEphemeral) &&
			errors.Is(a.Err, store.ErrInvalid) == errors.Is(b.Err, store.ErrInvalid)
	}
	return sameIDs(a.Removed, b.Removed...)
}

func (d *differ) compare() {
	ctx := context.Background()
	filters := make([]nostr.Filter, 1+d.g.pick(3))
	for i := range filters {
		filters[i] = d.g.filter()
	}
	it, err := d.st.Query(ctx, filters)
	if err != nil {
		d.t.Fatalf("Query: %v", err)
	}
	var got []store.Record
	for it.Next() {
		r := *it.Record()
		r.Raw = slices.Clone(r.Raw)
		got = append(got, r)
	}
	if err := it.Err(); err != nil {
		d.t.Fatal(err)
	}
	it.Close()
	mit, _ := d.m.Query(ctx, filters)
	var want []store.Record
	for mit.Next() {
		want = append(want, *mit.Record())
	}
	d.queryRuns++
	d.returned += len(want)
	if len(want) > 0 {
		d.nonEmpty++
	}
	if hasSearch(filters) {
		d.searches++
		d.compareSearch(filters, got, want)
	} else if !sameRecords(got, want) {
		d.t.Fatalf("Query %s:\n store %s\n model %s", fmtFilters(filters), fmtRecs(got), fmtRecs(want))
	}
	n1, err := d.st.Count(ctx, filters)
	if err != nil {
		d.t.Fatal(err)
	}
	if n2, _ := d.m.Count(ctx, filters); n1 != n2 {
		d.t.Fatalf("Count %s = %d, model %d", fmtFilters(filters), n1, n2)
	}
	max := 0
	if d.g.pick(3) == 0 {
		max = 1 + d.g.pick(int(n1)+2)
	}
	i1, err1 := d.st.Items(ctx, filters, max)
	i2, err2 := d.m.Items(ctx, filters, max)
	if !errors.Is(err1, store.ErrTooMany) && err1 != nil {
		d.t.Fatal(err1)
	}
	if errors.Is(err1, store.ErrTooMany) != errors.Is(err2, store.ErrTooMany) || !slices.Equal(i1, i2) {
		d.t.Fatalf("Items %s max %d: store %d %v, model %d %v", fmtFilters(filters), max, len(i1), err1, len(i2), err2)
	}
}

func hasSearch(filters []nostr.Filter) bool {
	for i := range filters {
		if filters[i].Search != "" {
			return true
		}
	}
	return false
}

// compareSearch compares the results of a query with search filters as
// sets, since stores rank differently: without a limit that cuts a search
// filter's matches the sets are equal; with one, the store returns only
// events the model would return without that limit, each once, and as
// many as the model (dedup aside, which the check allows for).
func (d *differ) compareSearch(filters []nostr.Filter, got, want []store.Record) {
	ctx := context.Background()
	cut := false
	unlimited := slices.Clone(filters)
	for i := range unlimited {
		f := &unlimited[i]
		if f.Search == "" || !f.HasLimit || f.Limit <= 0 {
			continue
		}
		if n, _ := d.m.Count(ctx, filters[i:i+1]); n > int64(f.Limit) {
			cut = true
		}
		f.HasLimit, f.Limit = false, 0
	}
	all := make(map[nostr.ID]store.Record)
	mit, _ := d.m.Query(ctx, unlimited)
	for mit.Next() {
		all[mit.Record().ID] = *mit.Record()
	}
	seen := make(map[nostr.ID]bool)
	for i := range got {
		r, ok := all[got[i].ID]
		if seen[got[i].ID] || !ok || !sameRecords(got[i:i+1], []store.Record{r}) {
			d.t.Fatalf("Query %s: store returned %s (repeated, or not a match, or different)\n store %s\n model %s",
				fmtFilters(filters), got[i].ID.Hex()[:8], fmtRecs(got), fmtRecs(want))
		}
		seen[got[i].ID] = true
	}
	if !cut {
		if len(got) != len(want) {
			d.t.Fatalf("Query %s: store %d records, model %d\n store %s\n model %s", fmtFilters(filters), len(got), len(want), fmtRecs(got), fmtRecs(want))
		}
		return
	}
	// Each search filter with a cutting limit yields exactly its limit;
	// overlaps between filters may make the union smaller than the
	// model's, but never smaller than the largest single filter's share.
	for i := range filters {
		f := &filters[i]
		if f.Search == "" || !f.HasLimit || f.Limit <= 0 {
			continue
		}
		it, err := d.st.Query(ctx, filters[i:i+1])
		if err != nil {
			d.t.Fatal(err)
		}
		n := 0
		for it.Next() {
			n++
		}
		it.Close()
		m, _ := d.m.Count(ctx, filters[i:i+1])
		if int64(n) != min(int64(f.Limit), m) {
			d.t.Fatalf("Query %s: store returned %d, want min(limit %d, matches %d)", fmtFilters(filters[i:i+1]), n, f.Limit, m)
		}
	}
}

func sameRecords(a, b []store.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.ID != y.ID || x.PubKey != y.PubKey || x.CreatedAt != y.CreatedAt || x.Kind != y.Kind || !bytes.Equal(x.Raw, y.Raw) {
			return false
		}
	}
	return true
}

// fmtFilters renders filters compactly for failure messages.
func fmtFilters(filters []nostr.Filter) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range filters {
		f := &filters[i]
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('{')
		sep := ""
		w := func(format string, args ...any) {
			b.WriteString(sep)
			fmt.Fprintf(&b, format, args...)
			sep = " "
		}
		short := func(s []string) []string {
			if len(s) > 8 {
				return append(s[:8:8], fmt.Sprintf("…(%d more)", len(s)-8))
			}
			return s
		}
		if f.HasIDs() {
			var s []string
			for _, id := range f.IDs {
				s = append(s, id.Hex()[:8])
			}
			w("ids:%v", short(s))
		}
		if f.HasAuthors() {
			var s []string
			for _, pk := range f.Authors {
				s = append(s, pk.Hex()[:8])
			}
			w("authors:%v", short(s))
		}
		if f.HasKinds() {
			w("kinds:%v", f.Kinds)
		}
		for _, tf := range f.Tags {
			var s []string
			for _, v := range tf.Values {
				if len(v) > 12 {
					v = v[:12] + "…"
				}
				s = append(s, strconv.Quote(v))
			}
			w("#%c:%v", tf.Name, s)
		}
		if f.HasSince {
			w("since:%d", f.Since)
		}
		if f.HasUntil {
			w("until:%d", f.Until)
		}
		if f.HasLimit {
			w("limit:%d", f.Limit)
		}
		if f.Search != "" {
			w("search:%q", f.Search)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}
