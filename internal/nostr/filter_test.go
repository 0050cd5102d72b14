package nostr

import "testing"

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
