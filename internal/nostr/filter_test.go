package nostr

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestFilterMatches checks Filter.Matches against NIP-01 on filters parsed
// from JSON: conditions are AND'ed, values inside a list OR'ed, since and
// until inclusive, a present empty list matches nothing, tag conditions look
// at the first value of single-letter tags, and limit and search do not
// affect matching.
func TestFilterMatches(t *testing.T) {
	ev := &Event{
		ID:        mustID(hexID),
		PubKey:    mustPK(hexPK),
		CreatedAt: 1000,
		Kind:      1,
		Tags:      Tags{{"e", "ev1", "wss://r"}, {"t", "nostr"}, {"t", "go"}, {"p"}, {"expiration", "x"}, {"T", "Upper"}},
	}
	other := hexN(1)
	f := func(filter string, want bool) {
		t.Helper()
		fl, err := ParseFilter([]byte(filter), nil)
		if err != nil {
			t.Fatalf("ParseFilter(%s): %v", filter, err)
		}
		if got := fl.Matches(ev); got != want {
			t.Errorf("%s matches = %v, want %v", filter, got, want)
		}
		if got := MatchesAny([]Filter{{Kinds: []int{99}}, fl}, ev); got != want {
			t.Errorf("MatchesAny with %s = %v, want %v", filter, got, want)
		}
		if want && fl.Empty() {
			t.Errorf("%s is Empty but matches", filter)
		}
	}
	f(`{}`, true)
	f(`{"ids":["`+hexID+`"]}`, true)
	f(`{"ids":["`+other+`","`+hexID+`"]}`, true)
	f(`{"ids":["`+other+`"]}`, false)
	f(`{"ids":[]}`, false)
	f(`{"authors":["`+hexPK+`"]}`, true)
	f(`{"authors":["`+other+`"]}`, false)
	f(`{"authors":[]}`, false)
	f(`{"kinds":[0,1]}`, true)
	f(`{"kinds":[0]}`, false)
	f(`{"kinds":[]}`, false)
	f(`{"since":1000}`, true)
	f(`{"since":1001}`, false)
	f(`{"until":1000}`, true)
	f(`{"until":999}`, false)
	f(`{"since":1000,"until":1000}`, true)
	f(`{"since":1001,"until":999}`, false)
	f(`{"#e":["ev1"]}`, true)
	f(`{"#e":["wss://r"]}`, false) // only the tag's value, not later elements
	f(`{"#t":["x","go"]}`, true)
	f(`{"#t":["x"]}`, false)
	f(`{"#t":[]}`, false)
	f(`{"#T":["Upper"]}`, true)
	f(`{"#T":["nostr"]}`, false) // tag names are case-sensitive
	f(`{"#p":[""]}`, false)      // a tag without a value matches nothing
	f(`{"#x":["a"]}`, false)
	f(`{"#e":["ev1"],"#t":["nostr"]}`, true)
	f(`{"#e":["ev1"],"#t":["rust"]}`, false)
	f(`{"kinds":[1],"authors":["`+hexPK+`"],"since":1,"until":2000,"#t":["go"],"limit":0}`, true)
	f(`{"kinds":[1],"authors":["`+other+`"],"since":1,"until":2000}`, false)
	f(`{"limit":0}`, true)
	f(`{"search":"anything"}`, true)
}

func TestFilterEmpty(t *testing.T) {
	f := func(filter string, want bool) {
		t.Helper()
		fl, err := ParseFilter([]byte(filter), nil)
		if err != nil {
			t.Fatalf("ParseFilter(%s): %v", filter, err)
		}
		if got := fl.Empty(); got != want {
			t.Errorf("%s Empty = %v, want %v", filter, got, want)
		}
	}
	f(`{}`, false)
	f(`{"ids":[]}`, true)
	f(`{"authors":[]}`, true)
	f(`{"kinds":[]}`, true)
	f(`{"#e":[]}`, true)
	f(`{"since":5,"until":4}`, true)
	f(`{"since":5,"until":5}`, false)
	f(`{"kinds":[1],"limit":0}`, false)
}

// TestPrepareKeepsMatches: sorting a filter's lists (Prepare) never
// changes what it matches, for short (scanned) and long (binary-searched)
// lists alike.
func TestPrepareKeepsMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	keys := make([]PubKey, 40)
	ids := make([]ID, 40)
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	for i := range keys {
		fill(keys[i][:])
		fill(ids[i][:])
	}
	vals := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	pickKeys := func(n int) []PubKey {
		out := make([]PubKey, n)
		for i := range out {
			out[i] = keys[rng.IntN(len(keys))]
		}
		return out
	}
	for trial := 0; trial < 2000; trial++ {
		var f Filter
		if rng.IntN(2) == 0 {
			f.Authors = pickKeys(1 + rng.IntN(30))
		}
		if rng.IntN(3) == 0 {
			f.IDs = make([]ID, 1+rng.IntN(20))
			for i := range f.IDs {
				f.IDs[i] = ids[rng.IntN(len(ids))]
			}
		}
		if rng.IntN(2) == 0 {
			n := 1 + rng.IntN(len(vals))
			tv := make([]string, n)
			for i := range tv {
				tv[i] = vals[rng.IntN(len(vals))]
			}
			f.Tags = []TagFilter{{Name: 't', Values: tv}}
		}
		if rng.IntN(2) == 0 {
			f.Kinds = []int{1, 7, 0}[:1+rng.IntN(3)]
		}
		p := f
		p.Authors = append([]PubKey(nil), f.Authors...)
		p.IDs = append([]ID(nil), f.IDs...)
		if f.Tags != nil {
			p.Tags = []TagFilter{{Name: 't', Values: append([]string(nil), f.Tags[0].Values...)}}
		}
		p.Kinds = append([]int(nil), f.Kinds...)
		p.Prepare()
		for e := 0; e < 20; e++ {
			ev := &Event{PubKey: keys[rng.IntN(len(keys))], ID: ids[rng.IntN(len(ids))], Kind: []int{0, 1, 7}[rng.IntN(3)],
				Tags: Tags{{"t", vals[rng.IntN(len(vals))]}, {"t", vals[rng.IntN(len(vals))]}}}
			if f.Matches(ev) != p.Matches(ev) {
				t.Fatalf("trial %d: Prepare changed the match of %+v", trial, ev)
			}
		}
	}
}

// TestSortedHas compares the binary search of prepared lists with a scan,
// on lists of every length around sortedScan, with keys that share their
// first 8 bytes (the search decides on those first) and keys absent below,
// between and above the list's.
func TestSortedHas(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	key := func() PubKey {
		var k PubKey
		for i := range k {
			k[i] = byte(rng.IntN(4)) // few values: many shared prefixes and ties
		}
		return k
	}
	for n := 0; n < 3*sortedScan; n++ {
		for round := 0; round < 50; round++ {
			list := make([]PubKey, n)
			for i := range list {
				list[i] = key()
			}
			slices.SortFunc(list, func(a, b PubKey) int { return bytes.Compare(a[:], b[:]) })
			for probe := 0; probe < 20; probe++ {
				v := key()
				if probe%3 == 0 && n > 0 {
					v = list[rng.IntN(n)]
				}
				if got, want := sortedHas(list, &v), slices.Contains(list, v); got != want {
					t.Fatalf("n=%d: sortedHas(%x) = %v, want %v", n, v[:], got, want)
				}
			}
		}
	}
	var lo, hi PubKey
	for i := range hi {
		hi[i] = 0xff
	}
	list := []PubKey{}
	for i := range 2 * sortedScan {
		var k PubKey
		k[0], k[31] = 0x80, byte(i)
		list = append(list, k)
	}
	if sortedHas(list, &lo) || sortedHas(list, &hi) || !sortedHas(list, &list[0]) || !sortedHas(list, &list[len(list)-1]) {
		t.Fatal("bounds")
	}
}

// TestParseFilterStrict: the tools' parser refuses unknown keys (naming a
// likely meant key), where ParseFilter skips them; everything else is
// ParseFilter's.
func TestParseFilterStrict(t *testing.T) {
	f := func(in, wantErr string) {
		t.Helper()
		_, err := ParseFilterStrict([]byte(in), nil)
		if wantErr == "" {
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			if _, lerr := ParseFilter([]byte(in), nil); lerr != nil {
				t.Fatalf("%s: lenient parser: %v", in, lerr)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v, want %q", in, err, wantErr)
		}
	}
	f(`{"kinds":[1],"authors":[],"ids":[],"since":1,"until":2,"limit":3,"search":"x","#e":["a"],"#T":["b"]}`, "")
	f(`{}`, "")
	f(`{"kind":[1]}`, `unknown filter key "kind" (did you mean "kinds"?)`)
	f(`{"author":["x"]}`, `did you mean "authors"?`)
	f(`{"Limit":2}`, `did you mean "limit"?`)
	f(`{"frobnicate":1}`, `unknown filter key "frobnicate" (filters take ids`)
	f(`{"#ee":["a"]}`, "unsupported tag filter")
	if fl, err := ParseFilter([]byte(`{"kind":[1]}`), nil); err != nil || fl.HasKinds() {
		t.Fatalf("the relay's parser skips unknown keys: %+v %v", fl, err)
	}
}
