package nostr

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The fuzz targets check invariants of the parsers on arbitrary input: no
// panic, errors are *ParseError, whatever is accepted is valid JSON that
// encoding/json reads the same way, and re-serializing what was parsed and
// parsing it again gives the same result. Seeds come from f.Add (and from
// testdata/fuzz/<target> for inputs the fuzzer found).

func addEventSeeds(f *testing.F) {
	for _, re := range realEvents {
		f.Add([]byte(re.json))
	}
	f.Add([]byte(evWith()))
	f.Add([]byte(evWith(field{"content", `"a\"b\\c\/d\n\u00e9\ud83d\ude00\u0000"`}, field{"tags", `[[],["",""],["x","\u2028"]]`})))
	f.Add([]byte(evWith(field{"extra", `{"a":[1,-2.5e+3,{"b":null}],"c":true}`})))
	f.Add([]byte(" \n" + evWith(field{"created_at", "0"}, field{"kind", "65535"}) + "\t"))
	f.Add([]byte(`{"id":"` + hexID + `","kind":01}`))
	r := rand.New(rand.NewPCG(7, 8))
	for range 5 {
		f.Add(Serialize(randEvent(r)))
	}
}

func FuzzParseEvent(f *testing.F) {
	addEventSeeds(f)
	lim := &Limits{MaxTags: 3, MaxTagElems: 3, MaxContentBytes: 40}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := ParseEvent(data, nil)
		limited, lerr := ParseEvent(data, lim)
		if err != nil {
			parseErr(t, err)
			if lerr == nil {
				t.Fatalf("accepted with limits, refused without: %v", err)
			}
			return
		}
		checkAcceptedEvent(t, data, ev)
		if lerr != nil {
			if b := parseErr(t, lerr).Bound; b != BoundTags && b != BoundTagElems && b != BoundContentBytes {
				t.Fatalf("refused with limits but not as one of them (Bound %v): %v", b, lerr)
			}
			return
		}
		if !eventsEqual(ev, limited) || len(limited.Tags) > 3 || len(limited.Content) > 40 {
			t.Fatalf("limits not honoured or result differs: %+v", limited)
		}
	})
}

func addFilterSeeds(f *testing.F) {
	for _, fl := range []string{
		`{}`,
		`{"ids":["` + hexID + `"],"authors":["` + hexPK + `"],"kinds":[0,1,65535]}`,
		`{"ids":[],"authors":[],"kinds":[]}`,
		`{"since":0,"until":9007199254740991,"limit":10,"search":"q\u00e9"}`,
		`{"#t":["nostr","b\u00e9"],"#e":["not-hex"],"#E":["x"],"#p":[]}`,
		`{"kinds":[1],"foo":{"bar":[1,2,{"x":null}]},"LIMIT":-1.5e3}`,
		`{"kin\u0064s":[7],"\u0023d":["a"]}`,
		`{"#emoji":["x"]}`,
	} {
		f.Add([]byte(fl))
	}
}

func FuzzParseFilter(f *testing.F) {
	addFilterSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := ParseFilter(data, nil)
		// The strict parser (the tools') accepts a subset, and reads what
		// it accepts as the relay's parser does.
		strict, serr := ParseFilterStrict(data, nil)
		if serr == nil && (err != nil || !reflect.DeepEqual(strict, fl)) {
			t.Fatalf("%q: strict %+v, lenient %+v %v", data, strict, fl, err)
		}
		if err != nil {
			parseErr(t, err)
			return
		}
		checkAcceptedFilter(t, data, &fl)
	})
}

// checkAcceptedFilter compares an accepted filter with what encoding/json
// reads from the same bytes, and checks the AppendFilter round trip.
func checkAcceptedFilter(t *testing.T, data []byte, fl *Filter) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("accepted invalid JSON %q", data)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("encoding/json refuses %q: %v", data, err)
	}
	var want Filter
	var hexes []string
	if raw, ok := m["ids"]; ok {
		want.Present |= PresentIDs
		json.Unmarshal(raw, &hexes)
		for _, h := range hexes {
			want.IDs = append(want.IDs, mustID(h))
		}
	}
	hexes = nil
	if raw, ok := m["authors"]; ok {
		want.Present |= PresentAuthors
		json.Unmarshal(raw, &hexes)
		for _, h := range hexes {
			want.Authors = append(want.Authors, mustPK(h))
		}
	}
	if raw, ok := m["kinds"]; ok {
		want.Present |= PresentKinds
		json.Unmarshal(raw, &want.Kinds)
	}
	if raw, ok := m["since"]; ok {
		want.HasSince = json.Unmarshal(raw, &want.Since) == nil
	}
	if raw, ok := m["until"]; ok {
		want.HasUntil = json.Unmarshal(raw, &want.Until) == nil
	}
	if raw, ok := m["limit"]; ok {
		want.HasLimit = json.Unmarshal(raw, &want.Limit) == nil
	}
	if raw, ok := m["search"]; ok {
		json.Unmarshal(raw, &want.Search)
	}
	for c := byte('A'); c <= 'z'; c++ {
		if raw, ok := m["#"+string(rune(c))]; ok {
			tf := TagFilter{Name: c}
			json.Unmarshal(raw, &tf.Values)
			want.Tags = append(want.Tags, tf)
		}
	}
	if !filtersEqual(fl, &want) {
		t.Fatalf("parsed %q as\n%+v\nencoding/json says\n%+v", data, *fl, want)
	}
	b := AppendFilter(nil, fl)
	again, err := ParseFilter(b, nil)
	if err != nil || !filtersEqual(fl, &again) {
		t.Fatalf("AppendFilter round trip: %s: %v\n%+v", b, err, again)
	}
}

// filtersEqual compares filters, treating nil and empty lists alike.
func filtersEqual(a, b *Filter) bool {
	norm := func(f *Filter) Filter {
		c := *f
		if len(c.IDs) == 0 {
			c.IDs = nil
		}
		if len(c.Authors) == 0 {
			c.Authors = nil
		}
		if len(c.Kinds) == 0 {
			c.Kinds = nil
		}
		if len(c.Tags) == 0 {
			c.Tags = nil
		}
		c.Tags = append([]TagFilter(nil), c.Tags...)
		for i := range c.Tags {
			if len(c.Tags[i].Values) == 0 {
				c.Tags[i].Values = nil
			}
		}
		return c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func FuzzParseClientMessage(f *testing.F) {
	ev := evWith()
	for _, m := range []string{
		`["EVENT",` + ev + `]`,
		`["AUTH",` + ev + `]`,
		`["REQ","sub1",{"kinds":[1]},{"authors":["` + hexPK + `"],"#t":["x"]}]`,
		`["COUNT","c",{"kinds":[3]}]`,
		`["CLOSE","sub1"]`,
		`["NEG-OPEN","n",{"kinds":[1]},"6100ff"]`,
		`["NEG-MSG","n","abcd"]`,
		`["NEG-CLOSE","n"]`,
		`["\u0052EQ","s\u00e9",{}]`,
		`["HELLO"]`,
	} {
		f.Add([]byte(m))
	}
	lim := &Limits{MaxFilters: 2, MaxFilterValues: 3, MaxTags: 3, MaxTagElems: 3, MaxSubIDLen: 8, MaxContentBytes: 40}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseClientMessage(data, nil)
		_, lerr := ParseClientMessage(data, lim)
		if err != nil {
			parseErr(t, err)
			if lerr == nil {
				t.Fatalf("accepted with limits, refused without: %v", err)
			}
			return
		}
		if lerr != nil {
			// Inputs here are far below the size ceilings: a Limits bound.
			if b := parseErr(t, lerr).Bound; b < BoundSubIDLen || b > BoundContentBytes {
				t.Fatalf("refused with limits but not as one of them (Bound %v): %v", b, lerr)
			}
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(data, &arr); err != nil || len(arr) == 0 {
			t.Fatalf("encoding/json: %v", err)
		}
		var label string
		if json.Unmarshal(arr[0], &label) != nil || label != m.Type.String() {
			t.Fatalf("label %q, type %v", label, m.Type)
		}
		switch m.Type {
		case MsgEvent, MsgAuth:
			if len(arr) != 2 {
				t.Fatalf("%d elements", len(arr))
			}
			checkAcceptedEvent(t, arr[1], m.Event)
		case MsgReq, MsgCount, MsgNegOpen:
			if len(m.Filters) == 0 || len(m.Filters) != len(arr)-2-btoi(m.Type == MsgNegOpen) {
				t.Fatalf("%d filters in %d elements", len(m.Filters), len(arr))
			}
			for i := range m.Filters {
				checkAcceptedFilter(t, arr[2+i], &m.Filters[i])
			}
		}
		if m.Type != MsgEvent && m.Type != MsgAuth {
			var sub string
			if json.Unmarshal(arr[1], &sub) != nil || sub != m.SubID || sub == "" {
				t.Fatalf("subid %q, encoding/json says %q", m.SubID, sub)
			}
		}
		if m.Type == MsgNegOpen || m.Type == MsgNegMsg {
			var h string
			json.Unmarshal(arr[len(arr)-1], &h)
			want, _ := hex.DecodeString(h)
			if !bytes.Equal(m.NegPayload, want) {
				t.Fatalf("payload %x, want %x", m.NegPayload, want)
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func FuzzParseRelayMessage(f *testing.F) {
	id := mustID(hexID)
	for _, m := range [][]byte{
		AppendEventFrame(nil, "sub", []byte(evWith())),
		AppendEventFrame(nil, "s\n", []byte(realEvents[2].json)),
		AppendOK(nil, id, true, ""),
		AppendOK(nil, id, false, "invalid: \"x\""),
		AppendEOSE(nil, "s"),
		AppendClosed(nil, "s", "error: x"),
		AppendNotice(nil, "hello"),
		AppendCount(nil, "c", 42, true, []byte{1, 2}),
		[]byte(`["COUNT","c",{"extra":[1],"approximate":false,"count":5}]`),
		AppendAuthChallenge(nil, "chal"),
		AppendNegMsg(nil, "n", []byte{1, 2}),
		AppendNegErr(nil, "n", "closed"),
	} {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseRelayMessage(data)
		if err != nil {
			parseErr(t, err)
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		// Rebuild the message with the builders and parse it again.
		var b []byte
		switch m.Type {
		case LabelEvent:
			if !bytes.Equal(m.RawEvent, m.Event.Raw) {
				t.Fatal("RawEvent is not Event.Raw")
			}
			b = AppendEventFrame(nil, m.SubID, m.RawEvent)
		case LabelOK:
			b = AppendOK(nil, m.EventID, m.OK, m.Message)
		case LabelEOSE:
			b = AppendEOSE(nil, m.SubID)
		case LabelClosed:
			b = AppendClosed(nil, m.SubID, m.Message)
		case LabelNotice:
			b = AppendNotice(nil, m.Message)
		case LabelCount:
			b = AppendCount(nil, m.SubID, m.Count, m.Approximate, m.HLL)
		case LabelAuth:
			b = AppendAuthChallenge(nil, m.Message)
		case LabelNegMsg:
			b = AppendNegMsg(nil, m.SubID, m.NegPayload)
		case LabelNegErr:
			b = AppendNegErr(nil, m.SubID, m.Message)
		default:
			t.Fatalf("unknown type %q accepted", m.Type)
		}
		again, err := ParseRelayMessage(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if m.Event != nil {
			if !eventsEqual(m.Event, again.Event) {
				t.Fatalf("event differs after round trip")
			}
			m.Event, m.RawEvent, again.Event, again.RawEvent = nil, nil, nil, nil
		}
		if len(m.HLL) == 0 && len(again.HLL) == 0 {
			m.HLL, again.HLL = nil, nil
		}
		if len(m.NegPayload) == 0 && len(again.NegPayload) == 0 {
			m.NegPayload, again.NegPayload = nil, nil
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip differs:\n%+v\n%+v", *m, *again)
		}
	})
}
