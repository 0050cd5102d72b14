package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestParseOKTrace(t *testing.T) {
	id1, id2 := nostr.ID{1}, nostr.ID{2}
	good := "# petrel oktrace v1: id received verified committed answered (unix ns); records 2 dropped 3\n" +
		id1.Hex() + " 100 110 120 130\n" + id2.Hex() + " 200 0 0 205\n"
	recs, dropped, err := parseOKTrace(strings.NewReader(good))
	if err != nil || dropped != 3 || len(recs) != 2 || recs[id1] != (okTraceRec{100, 130}) || recs[id2] != (okTraceRec{200, 205}) {
		t.Fatalf("%v %d %+v", err, dropped, recs)
	}
	for name, bad := range map[string]string{
		"empty":     "",
		"no header": id1.Hex() + " 1 2 3 4\n",
		"short":     strings.Replace(good, " 0 0 205", " 205", 1),
		"bad id":    strings.Replace(good, id2.Hex(), "zz", 1),
		"bad time":  strings.Replace(good, " 100 ", " x ", 1),
		"count":     strings.Replace(good, "records 2", "records 3", 1),
		"negative":  strings.Replace(good, "dropped 3", "dropped -1", 1),
		"huge":      strings.Replace(good, "records 2", "records 9000000000000000000", 1),
	} {
		if _, _, err := parseOKTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestSplitOKs(t *testing.T) {
	// 200 events: event i sent at i+1 ms, parsed 1 ms later (10 ms for
	// the last), answered 2 ms after that, its OK read 0.5 ms later.
	// Event 3 was never answered and event 4 is not in the trace.
	const n = 200
	ids := make([]nostr.ID, n)
	sent := make([]int64, n)
	ok := make([]int64, n)
	recs := map[nostr.ID]okTraceRec{}
	for i := range ids {
		ids[i] = nostr.ID{byte(i), byte(i >> 8), 1}
		sent[i] = int64(i+1) * 1_000_000
		before := int64(1_000_000)
		if i == n-1 {
			before = 10_000_000
		}
		rec := okTraceRec{received: sent[i] + before, answered: sent[i] + before + 2_000_000}
		ok[i] = rec.answered + 500_000
		if i != 4 {
			recs[ids[i]] = rec
		}
	}
	ok[3] = 0
	pos := make(map[nostr.ID]int, n)
	for i, id := range ids {
		pos[id] = i
	}
	index := func(id nostr.ID) (int, bool) { i, ok := pos[id]; return i, ok }
	sp := splitOKs(index, func(i int) int64 { return sent[i] }, func(i int) int64 { return ok[i] }, 0, n, recs)
	if sp == nil || sp.Matched != n-2 {
		t.Fatalf("%+v", sp)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// 198 matched: the 99th percentile is the 197th value, a 1 ms one;
	// the slowest 1% is one event, the last (10 ms before the parse).
	if !near(sp.BeforeP99Ms, 1) || !near(sp.InsideP99Ms, 2) || !near(sp.AfterP99Ms, 0.5) {
		t.Errorf("p99s %+v", sp)
	}
	if !near(sp.TailMs, 12.5) || !near(sp.TailBeforeMs, 10) || !near(sp.TailInsideMs, 2) || !near(sp.TailAfterMs, 0.5) {
		t.Errorf("tail %+v", sp)
	}
	// A range with nothing matched gives nothing; one event is its own tail.
	if sp := splitOKs(index, func(i int) int64 { return sent[i] }, func(i int) int64 { return ok[i] }, 3, 5, recs); sp != nil {
		t.Errorf("unmatched range: %+v", sp)
	}
	if sp := splitOKs(index, func(i int) int64 { return sent[i] }, func(i int) int64 { return ok[i] }, n-1, n, recs); sp == nil || sp.Matched != 1 || !near(sp.TailBeforeMs, 10) || !near(sp.BeforeP99Ms, 10) {
		t.Errorf("one event: %+v", sp)
	}
}

// FuzzParseOKTrace: any answer parses or is refused with an error, never
// panics (nor allocates what a header merely claims).
func FuzzParseOKTrace(f *testing.F) {
	id := nostr.ID{1}
	f.Add("# petrel oktrace v1: id received verified committed answered (unix ns); records 1 dropped 0\n" + id.Hex() + " 1 2 3 4\n")
	f.Add("# petrel oktrace v1: ; records 0 dropped 0\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		recs, dropped, err := parseOKTrace(strings.NewReader(s))
		if err == nil && (dropped < 0 || recs == nil) {
			t.Fatalf("parsed %d records, %d dropped", len(recs), dropped)
		}
	})
}
