package nostr

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// realEvents are events from the network (taken from public test suites of
// other Nostr implementations) whose ids and signatures are genuine: a
// matching ComputeID is an independent check of the canonical form. They
// cover \" escapes, \u escapes of non-ASCII and of surrogate pairs, raw
// emoji, raw U+2028 (which must stay verbatim) and arbitrary key order and
// whitespace.
var realEvents = []struct{ name, json string }{
	{"plain", `{"id":"dc90c95f09947507c1044e8f48bcf6350aa6bff1507dd4acfc755b9239b5c962","pubkey":"3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d","created_at":1644271588,"kind":1,"tags":[],"content":"now that https://blueskyweb.org/blog/2-7-2022-overview was announced we can stop working on nostr?","sig":"230e9d8f0ddaf7eb70b5f7741ccfa37e87a455c9a469282e3464e2052d3192cd63a167e196e381ef9d7e69e9ea43af2443b839974dc85d8aaab9efe1d9296524"}`},
	{"kind3-quotes", `{"id":"9e662bdd7d8abc40b5b15ee1ff5e9320efc87e9274d8d440c58e6eed2dddfbe2","pubkey":"373ebe3d45ec91977296a178d9f19f326c70631d2a1b0bbba5c5ecc2eb53b9e7","created_at":1644844224,"kind":3,"tags":[["p","3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"],["p","75fc5ac2487363293bd27fb0d14fb966477d0f1dbc6361d37806a6a740eda91e"],["p","46d0dfd3a724a302ca9175163bdf788f3606b3fd1bb12d5fe055d1e418cb60ea"]],"content":"{\"wss://nostr-pub.wellorder.net\":{\"read\":true,\"write\":true},\"wss://nostr.bitcoiner.social\":{\"read\":false,\"write\":true},\"wss://expensive-relay.fiatjaf.com\":{\"read\":true,\"write\":true},\"wss://relayer.fiatjaf.com\":{\"read\":true,\"write\":true},\"wss://relay.bitid.nz\":{\"read\":true,\"write\":true},\"wss://nostr.rocks\":{\"read\":true,\"write\":true}}","sig":"811355d3484d375df47581cb5d66bed05002c2978894098304f20b595e571b7e01b2efd906c5650080ffe49cf1c62b36715698e9d88b9e8be43029a2f3fa66be"}`},
	{"u-escapes-surrogates", `{"id": "cd720b23163210ebddec88bc4e74d83c9667cdf11b95d376865315c686ed34eb", "pubkey": "11d0b66747887ba9a6d34b23eb31287374b45b1a1b161eac54cb183c53e00ef7", "created_at": 1684947090, "kind": 1, "tags": [["e", "f9f30e37adffe3afe12fda2f8db4502ece334f261273a9a0be7e8adb29b35145"], ["p", "9eefd04d32ab5da8de12d7b83201578ea095a676acf3a692ec1b0b202ae4e16f"]], "content": "I'll take a large lill\u00f6rdag please.\n\n\ud83d\ude0e\ud83e\udd19\ud83d\udc47\ud83c\udf7b\n\nnostr:nevent1qqs0nucwx7kllca0uyha5tudk3gzan3nfunpyuaf5zl8azkm9xe4z3gpzamhxue69uhhyetvv9ujumn0wd68ytnzv9hxgtczyz0wl5zdx244m2x7zttmsvsp2782p9dxw6k08f5jasdskgp2unsk7qcyqqqqqqgncdx20", "sig": "6c66e42dd481a0769148be33932a643672710f0ed83eeaaf4af5fe0f53e52b810a924ba2498354b8b00a54f065f4de0d92c42c70fdb39a2da67ac97baf4f9ae0"}`},
	{"raw-emoji", `{"kind":1,"id":"02c31c82cf7d8017c823bf119dbabd3ce22e9d66bb27277b064ca46b4196d93e","pubkey":"bbde6a0e8847e1cdb2ba5ec021cc949eb3cef125b8304a748fe11c0407990eec","created_at":1764776381,"tags":[],"content":"{\"label\":\"🍦 Vanilla\"}","sig":"02dbd2eea940b039e81cb0a50c48de287373b3a87d76e8ff5ed47379ce7c45ab23f0d19d9bdf0f7fc02998d46b02ff0b6d52466fd0aea3124219ea7ee5e5e74c"}`},
	{"raw-u2028", `{"id":"48a72b485d38338627ec9d427583551f9af4f016c739b8ec0d6313540a8b12cf","kind":1,"pubkey":"3d842afecd5e293f28b6627933704a3fb8ce153aa91d790ab11f6a752d44a42d","created_at":1677940007,"content":"I got asked about follower count again today. Why does my follower count go down when I delete public relays (in our list) and replace them with filter.nostr.wine? \n\nI’ll give you one final explanation to rule them all. First, let’s go over how clients calculate your follower count.\n\n1. Your client sends a request to all your connected relays asking for accounts who follow you\n2. Relays answer back with the events requested\n3. The client aggregates the event total and displays it\n\nEach relay has a set limit on how many stored events it will return per request. For some relays it’s 500, others 1000, some as high as 5000. Let’s say for simplicity that all your public relays use 500 as their limit. If you ask 10 relays for your followers the max possible answer you can get is 5000. That won’t change if you have 20,000 followers or 100,000. You may get back a “different” 5000 each time, but you’ll still cap out at 5000 because that is the most events your client will receive.` + "\u2028\u2028" + `Our limit on filter.nostr.wine is 2000 events. If you replace 10 public relays with only filter.nostr.wine, the MOST followers you will ever get back from our filter relay is 2000. That doesn’t mean you only have 2000 followers or that your reach is reduced in any way.\n\nAs long as you are writing to and reading from the same public relays, neither your reach nor any content was lost. That concludes my TED talk. I hope you all have a fantastic day and weekend.","tags":[],"sig":"dcaf8ab98bb9179017b35bd814092850d1062b26c263dff89fb1ae8c019a324139d1729012d9d05ff0a517f76b1117d869b2cc7d36bea8aa5f4b94c5e2548aa8"}`},
}

func TestParseEventRealEvents(t *testing.T) {
	for _, re := range realEvents {
		ev, err := ParseEvent([]byte(re.json), nil)
		if err != nil {
			t.Fatalf("%s: %v", re.name, err)
		}
		if got := ComputeID(ev); got != ev.ID {
			t.Errorf("%s: ComputeID = %s, event id %s\ncanonical: %s", re.name, got, ev.ID, AppendCanonical(nil, ev))
		}
		if !CheckID(ev) {
			t.Errorf("%s: CheckID false", re.name)
		}
		if string(ev.Raw) != re.json {
			t.Errorf("%s: Raw differs from input", re.name)
		}
		// The independent canonical form agrees too.
		if got, want := AppendCanonical(nil, ev), refCanonical(t, ev); !bytes.Equal(got, want) {
			t.Errorf("%s: canonical\n got %s\nwant %s", re.name, got, want)
		}
	}
}

func TestParseEventFields(t *testing.T) {
	in := " \n\t" + evWith(field{"content", `"a\"b\\c\/d\n\u00e9\ud83d\ude00"`},
		field{"tags", `[["e","x\ty"],[],["",""],["t","plain"]]`}) + "\r\n "
	ev, err := ParseEvent([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID.Hex() != hexID || ev.PubKey.Hex() != hexPK || ev.Sig.Hex() != hexSig {
		t.Errorf("hex fields: %s %s %s", ev.ID, ev.PubKey, ev.Sig.Hex())
	}
	if ev.CreatedAt != 1700000000 || ev.Kind != 1 {
		t.Errorf("created_at %d kind %d", ev.CreatedAt, ev.Kind)
	}
	if want := "a\"b\\c/d\né😀"; ev.Content != want {
		t.Errorf("content %q, want %q", ev.Content, want)
	}
	wantTags := Tags{{"e", "x\ty"}, {}, {"", ""}, {"t", "plain"}}
	if !eventsEqual(ev, &Event{ID: ev.ID, PubKey: ev.PubKey, Sig: ev.Sig, CreatedAt: ev.CreatedAt, Kind: ev.Kind, Content: ev.Content, Tags: wantTags}) {
		t.Errorf("tags %q, want %q", ev.Tags, wantTags)
	}
	if string(ev.Raw) != strings.TrimSpace(in) {
		t.Errorf("Raw %q, want the trimmed input", ev.Raw)
	}
	// Unescaped strings are substrings of Raw; escaped ones live in the
	// same allocation.
	for _, s := range []string{ev.Content, ev.Tags[0][0], ev.Tags[0][1], ev.Tags[3][1]} {
		if !withinRaw(s, ev.Raw) {
			t.Errorf("string %q is not in Raw's allocation", s)
		}
	}
	if cap(ev.Raw) != len(ev.Raw) {
		t.Errorf("cap(Raw) = %d, want %d (appending must not overwrite decoded strings)", cap(ev.Raw), len(ev.Raw))
	}
	if ev.Tags[0].Name() != "e" || len(ev.Tags[1]) != 0 {
		t.Errorf("tag shapes: %q", ev.Tags)
	}
}

func TestParseEventPrivateCopy(t *testing.T) {
	in := []byte(evWith(field{"content", `"hello world"`}))
	ev, err := ParseEvent(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'x'
	}
	if ev.Content != "hello world" || ev.Tags[0][0] != "e" || ev.Raw[0] != '{' {
		t.Errorf("event aliases the input: content %q tags %q", ev.Content, ev.Tags)
	}
}

func TestParseEventAccepts(t *testing.T) {
	f := func(name, in string, lim *Limits, check func(*Event) bool) {
		t.Helper()
		ev, err := ParseEvent([]byte(in), lim)
		if err != nil {
			t.Errorf("%s: unexpected error %v", name, err)
			return
		}
		if !json.Valid([]byte(in)) {
			t.Errorf("%s: accepted invalid JSON", name)
		}
		if check != nil && !check(ev) {
			t.Errorf("%s: check failed on %+v", name, ev)
		}
	}
	rev := `{"sig":"` + hexSig + `","content":"x","tags":[],"kind":7,"created_at":5,"pubkey":"` + hexPK + `","id":"` + hexID + `"}`
	f("reverse key order", rev, nil, func(e *Event) bool { return e.Kind == 7 && e.CreatedAt == 5 && e.Content == "x" })
	spaced := "{ \"id\" :\t\"" + hexID + "\" ,\n\"pubkey\"\r:\"" + hexPK + "\", \"created_at\" : 1 , \"kind\" : 2 , \"tags\" : [ [ \"a\" , \"b\" ] , [ ] ] , \"content\" : \"\" , \"sig\" : \"" + hexSig + "\" }"
	f("whitespace everywhere", spaced, nil, func(e *Event) bool {
		return len(e.Tags) == 2 && e.Tags[0][1] == "b" && len(e.Tags[1]) == 0 && e.Content == ""
	})
	f("empty tags and content", evWith(field{"tags", "[]"}, field{"content", `""`}), nil,
		func(e *Event) bool { return e.Tags == nil && e.Content == "" })
	f("only empty tags", evWith(field{"tags", "[[],[]]"}), nil,
		func(e *Event) bool { return len(e.Tags) == 2 && len(e.Tags[0]) == 0 && len(e.Tags[1]) == 0 })
	f("created_at 0, kind 0", evWith(field{"created_at", "0"}, field{"kind", "0"}), nil,
		func(e *Event) bool { return e.CreatedAt == 0 && e.Kind == 0 })
	f("created_at max, kind max", evWith(field{"created_at", "9007199254740991"}, field{"kind", "65535"}), nil,
		func(e *Event) bool { return e.CreatedAt == MaxTimestamp && e.Kind == MaxKind })
	f(`\u0000 in content`, evWith(field{"content", `"a\u0000b"`}), nil,
		func(e *Event) bool { return e.Content == "a\x00b" })
	f("uppercase \\u hex digits", evWith(field{"content", `"\u00E9\uD83D\uDE00"`}), nil,
		func(e *Event) bool { return e.Content == "é😀" })
	f("every short escape", evWith(field{"content", `"\"\\\/\b\f\n\r\t"`}), nil,
		func(e *Event) bool { return e.Content == "\"\\/\b\f\n\r\t" })
	f("raw multi-byte UTF-8", evWith(field{"content", `"é€中😀` + "\u2028\u2029\U0010FFFF\x7f" + `"`}), nil,
		func(e *Event) bool { return e.Content == "é€中😀\u2028\u2029\U0010FFFF\x7f" })
	f("escaped hex in id", evWith(field{"id", `"\u0035` + hexID[1:] + `"`}), nil,
		func(e *Event) bool { return e.ID.Hex() == hexID })
	f("escaped key", strings.Replace(evWith(), `"kind"`, `"ki\u006ed"`, 1), nil,
		func(e *Event) bool { return e.Kind == 1 })
	f("limits exactly met", evWith(field{"content", `"12345"`}),
		&Limits{MaxTags: 2, MaxTagElems: 3, MaxContentBytes: 5}, nil)
	f("content limit counts unescaped bytes", evWith(field{"content", `"\u00e9\u00e9"`}),
		&Limits{MaxContentBytes: 4}, func(e *Event) bool { return e.Content == "éé" })
	f("unknown keys are dropped from Raw", evWith(field{"extra", `{"a":[1,-2.5e+3,{"b":null}],"c":true}`}, field{"x", `"y"`}), nil,
		func(e *Event) bool { return string(e.Raw) == string(Serialize(e)) })
	f("many tags", evWith(field{"tags", "[" + strings.Repeat(`["p","x"],`, 999) + `["p","x"]]`}), nil,
		func(e *Event) bool { return len(e.Tags) == 1000 && e.Tags[999][1] == "x" })
}

func TestParseEventRejects(t *testing.T) {
	f := func(name, in string, lim *Limits, wantMsg string, wantLimit bool) {
		t.Helper()
		ev, err := ParseEvent([]byte(in), lim)
		if err == nil {
			t.Errorf("%s: accepted %q as %+v", name, in, ev)
			return
		}
		pe := parseErr(t, err)
		if !strings.Contains(pe.Msg, wantMsg) {
			t.Errorf("%s: error %q does not contain %q", name, pe.Msg, wantMsg)
		}
		if (pe.Bound != BoundNone) != wantLimit {
			t.Errorf("%s: Bound = %v, want a bound: %v (%q)", name, pe.Bound, wantLimit, pe.Msg)
		}
	}
	// Not an object.
	f("empty", "", nil, "JSON object", false)
	f("whitespace", "  \n", nil, "JSON object", false)
	f("array", "[]", nil, "JSON object", false)
	f("null", "null", nil, "JSON object", false)
	f("empty object", "{}", nil, `missing field "id"`, false)
	// Missing fields.
	for _, k := range eventFieldNames {
		f("missing "+k, evWith(field{k, ""}), nil, `missing field "`+k+`"`, false)
	}
	// Wrong types.
	f("id number", evWith(field{"id", "123"}), nil, "id must be a string", false)
	f("pubkey null", evWith(field{"pubkey", "null"}), nil, "pubkey must be a string", false)
	f("sig array", evWith(field{"sig", "[]"}), nil, "sig must be a string", false)
	f("created_at string", evWith(field{"created_at", `"1"`}), nil, "created_at must be an integer", false)
	f("created_at null", evWith(field{"created_at", "null"}), nil, "created_at must be an integer", false)
	f("kind string", evWith(field{"kind", `"1"`}), nil, "kind must be an integer", false)
	f("kind bool", evWith(field{"kind", "true"}), nil, "kind must be an integer", false)
	f("tags object", evWith(field{"tags", "{}"}), nil, "tags must be an array of arrays of strings", false)
	f("tags string", evWith(field{"tags", `"x"`}), nil, "tags must be an array of arrays of strings", false)
	f("tags null", evWith(field{"tags", "null"}), nil, "tags must be an array of arrays of strings", false)
	f("tag not array", evWith(field{"tags", `["e"]`}), nil, "tags must be an array of arrays of strings", false)
	f("tag number", evWith(field{"tags", `[["e",1]]`}), nil, "tags must be an array of arrays of strings", false)
	f("tag null", evWith(field{"tags", `[["e",null]]`}), nil, "tags must be an array of arrays of strings", false)
	f("tag nested", evWith(field{"tags", `[[["e"]]]`}), nil, "tags must be an array of arrays of strings", false)
	f("content number", evWith(field{"content", "1"}), nil, "content must be a string", false)
	f("content null", evWith(field{"content", "null"}), nil, "content must be a string", false)
	// Hex.
	f("id short", evWith(field{"id", `"` + hexID[:63] + `"`}), nil, "id must be 64 lowercase hex", false)
	f("id long", evWith(field{"id", `"` + hexID + `0"`}), nil, "id must be 64 lowercase hex", false)
	f("id uppercase", evWith(field{"id", `"` + strings.ToUpper(hexID) + `"`}), nil, "id must be 64 lowercase hex", false)
	f("id non-hex", evWith(field{"id", `"g` + hexID[1:] + `"`}), nil, "id must be 64 lowercase hex", false)
	f("pubkey uppercase", evWith(field{"pubkey", `"` + strings.ToUpper(hexPK) + `"`}), nil, "pubkey must be 64 lowercase hex", false)
	f("pubkey empty", evWith(field{"pubkey", `""`}), nil, "pubkey must be 64 lowercase hex", false)
	f("sig short", evWith(field{"sig", `"` + hexSig[:127] + `"`}), nil, "sig must be 128 lowercase hex", false)
	f("sig 64", evWith(field{"sig", `"` + hexID + `"`}), nil, "sig must be 128 lowercase hex", false)
	// Strings.
	f("invalid UTF-8 in content", evWith(field{"content", "\"a\xffb\""}), nil, "invalid UTF-8", false)
	f("invalid UTF-8 in tag", evWith(field{"tags", "[[\"e\",\"\xc3\"]]"}), nil, "invalid UTF-8", false)
	f("overlong UTF-8", evWith(field{"content", "\"\xc0\xaf\""}), nil, "invalid UTF-8", false)
	f("UTF-8 surrogate", evWith(field{"content", "\"\xed\xa0\x80\""}), nil, "invalid UTF-8", false)
	f("UTF-8 above U+10FFFF", evWith(field{"content", "\"\xf4\x90\x80\x80\""}), nil, "invalid UTF-8", false)
	f("truncated UTF-8 at end", evWith(field{"content", "\"\xe2\x82\""}), nil, "invalid UTF-8", false)
	f("invalid UTF-8 in key", strings.Replace(evWith(), `"kind"`, "\"ki\xffnd\"", 1), nil, "invalid UTF-8", false)
	f("raw control char", evWith(field{"content", "\"a\x01b\""}), nil, "raw control character 0x01", false)
	f("raw newline", evWith(field{"content", "\"a\nb\""}), nil, "raw control character 0x0a", false)
	f("raw tab in tag", evWith(field{"tags", "[[\"a\tb\"]]"}), nil, "raw control character 0x09", false)
	f("raw NUL", evWith(field{"content", "\"\x00\""}), nil, "raw control character 0x00", false)
	f("bad escape", evWith(field{"content", `"\x41"`}), nil, "bad escape 'x'", false)
	f("bad escape quote", evWith(field{"content", `"\'"`}), nil, "bad escape", false)
	f("short \\u", evWith(field{"content", `"\u12"`}), nil, `bad \u escape`, false)
	f("non-hex \\u", evWith(field{"content", `"\uzzzz"`}), nil, `bad \u escape`, false)
	f("lone high surrogate", evWith(field{"content", `"\ud800"`}), nil, "lone high surrogate", false)
	f("high surrogate then char", evWith(field{"content", `"\ud800x"`}), nil, "lone high surrogate", false)
	f("high surrogate then BMP escape", evWith(field{"content", `"\ud800\u0041"`}), nil, "lone high surrogate", false)
	f("two high surrogates", evWith(field{"content", `"\ud800\ud800"`}), nil, "lone high surrogate", false)
	f("lone low surrogate", evWith(field{"content", `"\udc00"`}), nil, "lone low surrogate", false)
	f("lone surrogate in tag", evWith(field{"tags", `[["\udfff"]]`}), nil, "lone low surrogate", false)
	f("unterminated string", `{"id":"abc`, nil, "unterminated string", false)
	f("backslash at end", `{"content":"abc\`, nil, "unterminated", false)
	// Numbers.
	f("created_at negative", evWith(field{"created_at", "-1"}), nil, "created_at must not be negative", false)
	f("created_at fraction", evWith(field{"created_at", "1.5"}), nil, "no fraction or exponent", false)
	f("created_at .0", evWith(field{"created_at", "1700000000.0"}), nil, "no fraction or exponent", false)
	f("created_at exponent", evWith(field{"created_at", "1e9"}), nil, "no fraction or exponent", false)
	f("created_at Exponent", evWith(field{"created_at", "1E9"}), nil, "no fraction or exponent", false)
	f("created_at leading zero", evWith(field{"created_at", "01"}), nil, "leading zeros", false)
	f("created_at 00", evWith(field{"created_at", "00"}), nil, "leading zeros", false)
	f("created_at too large", evWith(field{"created_at", "9007199254740992"}), nil, "created_at must be at most 9007199254740991", false)
	f("created_at overflow", evWith(field{"created_at", "99999999999999999999999999"}), nil, "created_at must be at most", false)
	f("created_at plus", evWith(field{"created_at", "+1"}), nil, "created_at must be an integer", false)
	f("kind too large", evWith(field{"kind", "65536"}), nil, "kind must be at most 65535", false)
	f("kind negative", evWith(field{"kind", "-1"}), nil, "kind must not be negative", false)
	f("kind fraction", evWith(field{"kind", "1.0"}), nil, "no fraction or exponent", false)
	f("kind exponent", evWith(field{"kind", "1e2"}), nil, "no fraction or exponent", false)
	f("kind leading zero", evWith(field{"kind", "01"}), nil, "leading zeros", false)
	// Duplicate keys.
	f("duplicate id", `{"id":"`+hexID+`",`+evWith()[1:], nil, `duplicate key "id"`, false)
	f("duplicate content", strings.TrimSuffix(evWith(), "}")+`,"content":"again"}`, nil, `duplicate key "content"`, false)
	f("duplicate tags", strings.TrimSuffix(evWith(), "}")+`,"tags":[]}`, nil, `duplicate key "tags"`, false)
	f("duplicate via escape", `{"i\u0064":"`+hexID+`",`+evWith()[1:], nil, `duplicate key "id"`, false)
	f("duplicate unknown", evWith(field{"x", "1"}, field{"x", "2"}), nil, `duplicate key "x"`, false)
	// Limits.
	f("too many tags", evWith(), &Limits{MaxTags: 1}, "too many tags (max 1)", true)
	f("too many tag elements", evWith(), &Limits{MaxTagElems: 2}, "too many elements in tag 1 (max 2)", true)
	f("content too long", evWith(), &Limits{MaxContentBytes: 4}, "content too long: 5 bytes (max 4)", true)
	f("giant tag array refused at the limit", evWith(field{"tags", "[" + strings.Repeat(`["p"],`, 100000) + `["p"]]`}), &Limits{MaxTags: 10}, "too many tags", true)
	// Syntax and trailing data.
	f("trailing garbage", evWith()+"x", nil, "trailing data", false)
	f("two objects", evWith()+evWith(), nil, "trailing data", false)
	f("trailing comma after object", evWith()+",", nil, "trailing data", false)
	f("trailing comma in object", strings.TrimSuffix(evWith(), "}")+",}", nil, "expected string (object key)", false)
	f("trailing comma in tags", evWith(field{"tags", `[["a"],]`}), nil, "tags must be an array of arrays", false)
	f("trailing comma in tag", evWith(field{"tags", `[["a",]]`}), nil, "tags must be an array of arrays", false)
	f("missing colon", strings.Replace(evWith(), `"kind":`, `"kind" `, 1), nil, "expected ':'", false)
	f("missing comma", strings.Replace(evWith(), `,"kind"`, ` "kind"`, 1), nil, "expected ',' or '}'", false)
	f("unterminated object", strings.TrimSuffix(evWith(), "}"), nil, "unexpected end of input", false)
	f("single quotes", strings.Replace(evWith(), `"kind"`, `'kind'`, 1), nil, "expected string (object key)", false)
	f("bad literal in unknown", evWith(field{"x", "tru"}), nil, "expected value", false)
	f("bad number in unknown", evWith(field{"x", "01"}), nil, "expected ',' or '}'", false)
	f("bad fraction in unknown", evWith(field{"x", "1."}), nil, "expected digit", false)
	f("trailing comma in unknown", evWith(field{"x", "[1,]"}), nil, "expected value", false)
	f("deep nesting in unknown", evWith(field{"x", strings.Repeat("[", 100) + strings.Repeat("]", 100)}), nil, "nesting too deep", false)
	f("bad string in unknown", evWith(field{"x", "\"\x01\""}), nil, "raw control character", false)
	f("NaN in unknown", evWith(field{"x", "NaN"}), nil, "expected value", false)
	f("too many unknown keys", evWith(unknownFields(65)...), nil, "too many unknown keys (max 64)", false)
}

// unknownFields returns n distinct unknown members.
func unknownFields(n int) []field {
	fs := make([]field, n)
	for i := range fs {
		fs[i] = field{"u" + strconv.Itoa(i), "0"}
	}
	return fs
}

func TestParseEventUnknownKeysAtLimit(t *testing.T) {
	ev, err := ParseEvent([]byte(evWith(unknownFields(64)...)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ev.Raw, Serialize(ev)) {
		t.Errorf("Raw keeps unknown keys: %s", ev.Raw)
	}
}

func TestParseEventErrorContext(t *testing.T) {
	// The id was read before the error: the relay can answer with an OK.
	_, err := ParseEvent([]byte(evWith(field{"sig", `"bad"`})), nil)
	pe := parseErr(t, err)
	if !pe.HasEventID || pe.EventID.Hex() != hexID {
		t.Errorf("HasEventID %v EventID %s, want the id", pe.HasEventID, pe.EventID)
	}
	// The error comes before the id.
	in := `{"kind":-1,"id":"` + hexID + `"}`
	_, err = ParseEvent([]byte(in), nil)
	if pe := parseErr(t, err); pe.HasEventID {
		t.Errorf("HasEventID set for an error before the id")
	}
	// A malformed id is not reported.
	_, err = ParseEvent([]byte(evWith(field{"id", `"` + strings.ToUpper(hexID) + `"`})), nil)
	if pe := parseErr(t, err); pe.HasEventID {
		t.Errorf("HasEventID set for a malformed id")
	}
	// Missing fields after a good id.
	_, err = ParseEvent([]byte(evWith(field{"sig", ""})), nil)
	if pe := parseErr(t, err); !pe.HasEventID {
		t.Errorf("HasEventID not set for a missing sig")
	}
	if got := parseErr(t, err).Error(); got != `nostr: missing field "sig"` {
		t.Errorf("Error() = %q", got)
	}
}

func TestSerializeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		ev := randEvent(r)
		b := Serialize(ev)
		if !json.Valid(b) {
			t.Fatalf("Serialize produced invalid JSON: %q", b)
		}
		got, err := ParseEvent(b, nil)
		if err != nil {
			t.Fatalf("ParseEvent(Serialize(ev)): %v\n%q", err, b)
		}
		if !eventsEqual(ev, got) {
			t.Fatalf("round trip differs:\n%+v\n%+v", ev, got)
		}
		if !bytes.Equal(got.Raw, b) {
			t.Fatalf("Raw %q, want %q", got.Raw, b)
		}
		if ComputeID(ev) != ComputeID(got) {
			t.Fatalf("ids differ after round trip")
		}
		if a := AppendEvent([]byte("prefix"), ev); string(a) != "prefix"+string(b) {
			t.Fatalf("AppendEvent does not append")
		}
	}
}

// TestParseEventDifferential compares ParseEvent with encoding/json on
// random valid events as encoding/json writes them (which escapes <, >, &,
// U+2028 and U+2029, so Raw differs from the canonical form).
func TestParseEventDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		want := randEvent(r)
		b, err := json.Marshal(toJSONEvent(want))
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 { // and sometimes with indentation
			var buf bytes.Buffer
			json.Indent(&buf, b, "  ", "\t")
			b = buf.Bytes()
		}
		got, err := ParseEvent(b, nil)
		if err != nil {
			t.Fatalf("ParseEvent: %v\n%s", err, b)
		}
		var j jsonEvent
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
		ref, _ := fromJSONEvent(&j)
		if !eventsEqual(got, ref) || !eventsEqual(got, want) {
			t.Fatalf("fields differ:\n got %+v\nwant %+v", got, ref)
		}
		if c, rc := AppendCanonical(nil, got), refCanonical(t, got); !bytes.Equal(c, rc) {
			t.Fatalf("canonical differs:\n got %q\nwant %q", c, rc)
		}
	}
}

// TestParseEventMutations feeds corrupted versions of valid events: whatever
// is accepted must be valid JSON that encoding/json decodes to the same
// fields.
func TestParseEventMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	for i := 0; i < 20000; i++ {
		b := Serialize(randEvent(r))
		switch r.IntN(4) {
		case 0:
			b[r.IntN(len(b))] = byte(r.IntN(256))
		case 1:
			j := r.IntN(len(b))
			b = append(b[:j], b[j+1:]...)
		case 2:
			j := r.IntN(len(b))
			b = append(b[:j], append([]byte{`"\,:[]{}0 u`[r.IntN(11)]}, b[j:]...)...)
		case 3:
			j, k := r.IntN(len(b)), r.IntN(len(b))
			b[j], b[k] = b[k], b[j]
		}
		ev, err := ParseEvent(b, nil)
		if err != nil {
			parseErr(t, err)
			continue
		}
		accepted++
		checkAcceptedEvent(t, b, ev)
	}
	if accepted == 0 {
		t.Error("no mutation was accepted; the test is not exercising acceptance")
	}
}

// checkAcceptedEvent asserts the invariants of an accepted event (shared
// with the fuzz target).
func checkAcceptedEvent(t *testing.T, in []byte, ev *Event) {
	t.Helper()
	trimmed := bytes.TrimSpace(in)
	if !json.Valid(trimmed) {
		t.Fatalf("accepted invalid JSON %q", in)
	}
	var j jsonEvent
	if err := json.Unmarshal(trimmed, &j); err != nil {
		t.Fatalf("accepted %q that encoding/json refuses: %v", in, err)
	}
	ref, ok := fromJSONEvent(&j)
	if !ok || !eventsEqual(ev, ref) {
		t.Fatalf("accepted %q as %+v, encoding/json says %+v", in, ev, j)
	}
	if !bytes.Equal(ev.Raw, trimmed) && !bytes.Equal(ev.Raw, Serialize(ev)) {
		t.Fatalf("Raw %q is neither the input nor Serialize", ev.Raw)
	}
	again, err := ParseEvent(Serialize(ev), nil)
	if err != nil || !eventsEqual(ev, again) {
		t.Fatalf("re-parse of Serialize failed: %v", err)
	}
	if ComputeID(ev) != ComputeID(again) {
		t.Fatalf("id changed on re-serialization")
	}
	if c, rc := AppendCanonical(nil, ev), refCanonical(t, ev); !bytes.Equal(c, rc) {
		t.Fatalf("canonical differs:\n got %q\nwant %q", c, rc)
	}
}

func TestParseEventAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	ev := typicalEvent()
	raw := ev.Raw
	n := testing.AllocsPerRun(200, func() {
		if _, err := ParseEvent(raw, nil); err != nil {
			t.Fatal(err)
		}
	})
	// Event, bytes, []string, Tags.
	if n > 4 {
		t.Errorf("ParseEvent: %.1f allocations per typical event, want <= 4", n)
	}
	msg := append(append([]byte(`["EVENT",`), raw...), ']')
	n = testing.AllocsPerRun(200, func() {
		if _, err := ParseClientMessage(msg, nil); err != nil {
			t.Fatal(err)
		}
	})
	if n > 4 {
		t.Errorf("ParseClientMessage(EVENT): %.1f allocations, want <= 4", n)
	}
}
