package nostr

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func mustID(s string) ID     { id, _ := ParseID(s); return id }
func mustPK(s string) PubKey { pk, _ := ParsePubKey(s); return pk }
func hexN(i int) string      { return strings.Repeat("0", 64-len(strconv.Itoa(i))) + strconv.Itoa(i) }
func quotedList(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + hexN(i) + `"`)
	}
	return b.String()
}

func TestParseFilterAccepts(t *testing.T) {
	f := func(in string, want Filter) {
		t.Helper()
		got, err := ParseFilter([]byte(in), nil)
		if err != nil {
			t.Errorf("ParseFilter(%s): %v", in, err)
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ParseFilter(%s)\n got %+v\nwant %+v", in, got, want)
		}
		if !json.Valid([]byte(in)) {
			t.Errorf("accepted invalid JSON %s", in)
		}
	}
	f(`{}`, Filter{})
	f(" {\n} \t", Filter{})
	f(`{"ids":["`+hexID+`"]}`, Filter{IDs: []ID{mustID(hexID)}, Present: PresentIDs})
	f(`{"authors":["`+hexPK+`","`+hexID+`"]}`, Filter{Authors: []PubKey{mustPK(hexPK), mustPK(hexID)}, Present: PresentAuthors})
	f(`{"kinds":[0,1,65535]}`, Filter{Kinds: []int{0, 1, 65535}, Present: PresentKinds})
	f(`{"ids":[],"authors":[],"kinds":[]}`, Filter{Present: PresentIDs | PresentAuthors | PresentKinds})
	f(`{"since":0,"until":9007199254740991,"limit":0}`, Filter{HasSince: true, HasUntil: true, Until: MaxTimestamp, HasLimit: true})
	f(`{"limit":500,"since":1700000000}`, Filter{Limit: 500, HasLimit: true, Since: 1700000000, HasSince: true})
	f(`{"search":"best nostr apps"}`, Filter{Search: "best nostr apps"})
	f(`{"search":""}`, Filter{})
	// Tag filters: values are plain strings (#e and #p are not checked as
	// hex), sorted by name.
	f(`{"#t":["nostr","b\u00e9"],"#e":["not-hex"],"#E":["x"],"#p":[]}`, Filter{Tags: []TagFilter{
		{Name: 'E', Values: []string{"x"}},
		{Name: 'e', Values: []string{"not-hex"}},
		{Name: 'p', Values: nil},
		{Name: 't', Values: []string{"nostr", "bé"}},
	}})
	// Unknown keys are ignored (their values must still be JSON).
	f(`{"kinds":[1],"foo":{"bar":[1,2,{"x":null}]},"ids2":"x","LIMIT":-1.5e3}`, Filter{Kinds: []int{1}, Present: PresentKinds})
	// Escaped keys.
	f(`{"kin\u0064s":[7],"\u0023d":["a"]}`, Filter{Kinds: []int{7}, Present: PresentKinds, Tags: []TagFilter{{Name: 'd', Values: []string{"a"}}}})
	// Limits met exactly.
	got, err := ParseFilter([]byte(`{"authors":[`+quotedList(3)+`],"#p":["a","b","c"]}`), &Limits{MaxFilterValues: 3})
	if err != nil || len(got.Authors) != 3 || len(got.Tags[0].Values) != 3 {
		t.Errorf("at the limit: %+v %v", got, err)
	}
}

func TestParseFilterRejects(t *testing.T) {
	f := func(in string, lim *Limits, wantMsg string, wantLimit bool) {
		t.Helper()
		got, err := ParseFilter([]byte(in), lim)
		if err == nil {
			t.Errorf("ParseFilter(%.80s) accepted: %+v", in, got)
			return
		}
		pe := parseErr(t, err)
		if !strings.Contains(pe.Msg, wantMsg) {
			t.Errorf("ParseFilter(%.80s): error %q does not contain %q", in, pe.Msg, wantMsg)
		}
		if (pe.Bound != BoundNone) != wantLimit {
			t.Errorf("ParseFilter(%.80s): Bound = %v, want a bound: %v", in, pe.Bound, wantLimit)
		}
	}
	f(``, nil, "filter must be a JSON object", false)
	f(`[]`, nil, "filter must be a JSON object", false)
	f(`{}x`, nil, "trailing data", false)
	f(`{"ids":"x"}`, nil, "ids must be an array", false)
	f(`{"ids":["`+hexID[:63]+`"]}`, nil, "ids value must be 64 lowercase hex", false)
	f(`{"ids":["abcd"]}`, nil, "ids value must be 64 lowercase hex", false) // no prefixes
	f(`{"ids":["`+strings.ToUpper(hexID)+`"]}`, nil, "ids value must be 64 lowercase hex", false)
	f(`{"ids":[1]}`, nil, "ids value must be a string", false)
	f(`{"authors":[null]}`, nil, "authors value must be a string", false)
	f(`{"authors":["`+hexPK+`0"]}`, nil, "authors value must be 64 lowercase hex", false)
	f(`{"kinds":[65536]}`, nil, "kinds value must be at most 65535", false)
	f(`{"kinds":[-1]}`, nil, "kinds value must not be negative", false)
	f(`{"kinds":["1"]}`, nil, "kinds value must be an integer", false)
	f(`{"kinds":[1.5]}`, nil, "no fraction or exponent", false)
	f(`{"kinds":{}}`, nil, "kinds must be an array", false)
	f(`{"since":-1}`, nil, "since must not be negative", false)
	f(`{"since":1.5}`, nil, "no fraction or exponent", false)
	f(`{"since":"1"}`, nil, "since must be an integer", false)
	f(`{"until":9007199254740992}`, nil, "until must be at most", false)
	f(`{"until":null}`, nil, "until must be an integer", false)
	f(`{"limit":-1}`, nil, "limit must not be negative", false)
	f(`{"limit":1e2}`, nil, "no fraction or exponent", false)
	f(`{"search":1}`, nil, "search must be a string", false)
	f(`{"#e":"x"}`, nil, "#e must be an array", false)
	f(`{"#e":[1]}`, nil, "#e values must be strings", false)
	f(`{"#e":[null]}`, nil, "#e values must be strings", false)
	f(`{"#emoji":["x"]}`, nil, `unsupported tag filter "#emoji"`, false)
	f(`{"#1":["x"]}`, nil, `unsupported tag filter "#1"`, false)
	f(`{"#":["x"]}`, nil, `unsupported tag filter "#"`, false)
	f(`{"#e":["\ud800"]}`, nil, "lone high surrogate", false)
	f("{\"#e\":[\"\xff\"]}", nil, "invalid UTF-8", false)
	// Duplicate keys.
	f(`{"ids":[],"ids":[]}`, nil, `duplicate key "ids"`, false)
	f(`{"kinds":[1],"kinds":[2]}`, nil, `duplicate key "kinds"`, false)
	f(`{"limit":1,"limit":2}`, nil, `duplicate key "limit"`, false)
	f(`{"#e":[],"#e":[]}`, nil, `duplicate key "#e"`, false)
	f(`{"#e":[],"\u0023e":[]}`, nil, `duplicate key "#e"`, false)
	f(`{"foo":1,"foo":2}`, nil, `duplicate key "foo"`, false)
	f(`{`+unknownMembers(65)+`}`, nil, "too many unknown keys (max 64)", false)
	// Limits: counted while reading, refused at MaxFilterValues+1.
	f(`{"authors":[`+quotedList(4)+`]}`, &Limits{MaxFilterValues: 3}, "too many values in authors (max 3)", true)
	f(`{"ids":[`+quotedList(4)+`]}`, &Limits{MaxFilterValues: 3}, "too many values in ids (max 3)", true)
	f(`{"kinds":[1,2,3,4]}`, &Limits{MaxFilterValues: 3}, "too many values in kinds (max 3)", true)
	f(`{"#t":["a","b","c","d"]}`, &Limits{MaxFilterValues: 3}, "too many values in #t (max 3)", true)
	// A huge list is refused at the limit, before the rest is read: the
	// input after the 4th value is not even valid.
	f(`{"kinds":[1,2,3,4,`+strings.Repeat("x", 1000), &Limits{MaxFilterValues: 3}, "too many values in kinds", true)
	// Syntax.
	f(`{"kinds":[1,]}`, nil, "kinds value must be an integer", false)
	f(`{"kinds":[1 2]}`, nil, "expected ',' or ']'", false)
	f(`{"kinds" [1]}`, nil, "expected ':'", false)
	f(`{"kinds":[1]`, nil, "unexpected end of input", false)
}

// unknownMembers returns n distinct unknown members, comma-separated.
func unknownMembers(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"u` + strconv.Itoa(i) + `":0`
	}
	return strings.Join(parts, ",")
}

func TestParseFilterUnknownKeysAtLimit(t *testing.T) {
	if _, err := ParseFilter([]byte(`{"kinds":[1],`+unknownMembers(64)+`}`), nil); err != nil {
		t.Fatal(err)
	}
}

func TestParseFilterPrivateStrings(t *testing.T) {
	in := []byte(`{"#t":["nostr"],"search":"query"}`)
	f, err := ParseFilter(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'x'
	}
	if f.Tags[0].Values[0] != "nostr" || f.Search != "query" {
		t.Errorf("filter aliases the input: %+v", f)
	}
}

// TestParseFilterSharedLists checks that the lists of several filters in one
// message, which share allocations, do not overlap: appending to one must
// not change another.
func TestParseFilterSharedLists(t *testing.T) {
	m, err := ParseClientMessage([]byte(`["REQ","s",{"kinds":[1,2],"#t":["a"]},{"kinds":[3],"#t":["b","c"]}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Filters[0], m.Filters[1]
	a.Kinds = append(a.Kinds, 99)
	a.Tags[0].Values = append(a.Tags[0].Values, "z")
	if !reflect.DeepEqual(b.Kinds, []int{3}) || !reflect.DeepEqual(b.Tags[0].Values, []string{"b", "c"}) {
		t.Errorf("filters overlap: %+v", b)
	}
}
