package nostr

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestParseClientMessageAccepts(t *testing.T) {
	ev := evWith()
	f := func(in string, lim *Limits, check func(*ClientMessage) bool) {
		t.Helper()
		m, err := ParseClientMessage([]byte(in), lim)
		if err != nil {
			t.Errorf("ParseClientMessage(%.80s): %v", in, err)
			return
		}
		if !check(m) {
			t.Errorf("ParseClientMessage(%.80s): unexpected %+v", in, m)
		}
	}
	f(`["EVENT",`+ev+`]`, nil, func(m *ClientMessage) bool {
		return m.Type == MsgEvent && m.Event != nil && m.Event.ID.Hex() == hexID && string(m.Event.Raw) == ev &&
			m.SubID == "" && m.Filters == nil
	})
	f(" [ \"EVENT\" ,\n"+ev+" ] \n", nil, func(m *ClientMessage) bool { return m.Type == MsgEvent && string(m.Event.Raw) == ev })
	f(`["AUTH",`+ev+`]`, nil, func(m *ClientMessage) bool { return m.Type == MsgAuth && m.Event.Kind == 1 })
	f(`["REQ","sub1",{"kinds":[1]}]`, nil, func(m *ClientMessage) bool {
		return m.Type == MsgReq && m.SubID == "sub1" && len(m.Filters) == 1 && reflect.DeepEqual(m.Filters[0].Kinds, []int{1})
	})
	f(`["REQ","s",{},{"authors":["`+hexPK+`"]},{"#t":["x"]}]`, nil, func(m *ClientMessage) bool {
		return len(m.Filters) == 3 && m.Filters[1].Authors[0].Hex() == hexPK && m.Filters[2].Tags[0].Values[0] == "x"
	})
	f(`["COUNT","c",{"kinds":[3]}]`, nil, func(m *ClientMessage) bool { return m.Type == MsgCount && m.SubID == "c" && len(m.Filters) == 1 })
	f(`["CLOSE","sub1"]`, nil, func(m *ClientMessage) bool { return m.Type == MsgClose && m.SubID == "sub1" && m.Filters == nil })
	f(`["NEG-OPEN","n",{"kinds":[1]},"6100Ff"]`, nil, func(m *ClientMessage) bool {
		return m.Type == MsgNegOpen && m.SubID == "n" && len(m.Filters) == 1 && bytes.Equal(m.NegPayload, []byte{0x61, 0x00, 0xff})
	})
	f(`["NEG-MSG","n",""]`, nil, func(m *ClientMessage) bool { return m.Type == MsgNegMsg && len(m.NegPayload) == 0 })
	f(`["NEG-MSG","n","abcd"]`, nil, func(m *ClientMessage) bool { return bytes.Equal(m.NegPayload, []byte{0xab, 0xcd}) })
	f(`["NEG-CLOSE","n"]`, nil, func(m *ClientMessage) bool { return m.Type == MsgNegClose && m.SubID == "n" })
	f(`["\u0052EQ","s\u00e9",{}]`, nil, func(m *ClientMessage) bool { return m.Type == MsgReq && m.SubID == "sé" })
	// Limits met exactly.
	f(`["REQ","`+strings.Repeat("x", 64)+`",{},{}]`, &Limits{MaxSubIDLen: 64, MaxFilters: 2}, func(m *ClientMessage) bool {
		return len(m.SubID) == 64 && len(m.Filters) == 2
	})
}

func TestParseClientMessageRejects(t *testing.T) {
	ev := evWith()
	f := func(in string, lim *Limits, wantType MsgType, wantSub string, wantMsg string, wantLimit bool) {
		t.Helper()
		m, err := ParseClientMessage([]byte(in), lim)
		if err == nil {
			t.Errorf("ParseClientMessage(%.80s) accepted: %+v", in, m)
			return
		}
		pe := parseErr(t, err)
		if !strings.Contains(pe.Msg, wantMsg) {
			t.Errorf("ParseClientMessage(%.80s): error %q does not contain %q", in, pe.Msg, wantMsg)
		}
		if pe.Type != wantType || pe.SubID != wantSub || (pe.Bound != BoundNone) != wantLimit {
			t.Errorf("ParseClientMessage(%.80s): Type %v SubID %q Bound %v, want %v %q a bound: %v (%s)",
				in, pe.Type, pe.SubID, pe.Bound, wantType, wantSub, wantLimit, pe.Msg)
		}
	}
	f(``, nil, MsgUnknown, "", "message must be a JSON array", false)
	f(`{}`, nil, MsgUnknown, "", "message must be a JSON array", false)
	f(`[]`, nil, MsgUnknown, "", "message must start with a string label", false)
	f(`[1]`, nil, MsgUnknown, "", "message must start with a string label", false)
	f(`["HELLO","x"]`, nil, MsgUnknown, "", `unknown message type "HELLO"`, false)
	f(`["event",`+ev+`]`, nil, MsgUnknown, "", `unknown message type "event"`, false)
	f(`["`+strings.Repeat("A", 100)+`"]`, nil, MsgUnknown, "", `unknown message type "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"...`, false)
	// EVENT and AUTH.
	f(`["EVENT"]`, nil, MsgEvent, "", "missing event", false)
	f(`["EVENT","x"]`, nil, MsgEvent, "", "event must be a JSON object", false)
	f(`["EVENT",`+ev+`,{}]`, nil, MsgEvent, "", "too many elements", false)
	f(`["EVENT",`+ev+`]x`, nil, MsgEvent, "", "trailing data", false)
	f(`["EVENT",`+ev, nil, MsgEvent, "", "unexpected end of input", false)
	f(`["AUTH",{}]`, nil, MsgAuth, "", `missing field "id"`, false)
	f(`["EVENT",`+evWith(field{"sig", `"x"`})+`]`, nil, MsgEvent, "", "sig must be 128 lowercase hex", false)
	f(`["EVENT",`+ev+`]`, &Limits{MaxTags: 1}, MsgEvent, "", "too many tags", true)
	// REQ, COUNT.
	f(`["REQ"]`, nil, MsgReq, "", "missing subscription id", false)
	f(`["REQ",1,{}]`, nil, MsgReq, "", "subscription id must be a string", false)
	f(`["REQ","",{}]`, nil, MsgReq, "", "subscription id must not be empty", false)
	f(`["REQ","s"]`, nil, MsgReq, "s", "missing filter", false)
	f(`["COUNT","s"]`, nil, MsgCount, "s", "missing filter", false)
	f(`["REQ","s",[]]`, nil, MsgReq, "s", "filter must be a JSON object", false)
	f(`["REQ","s",{"kinds":[-1]}]`, nil, MsgReq, "s", "kinds value must not be negative", false)
	f(`["REQ","s\u00e9",{"kinds":"x"}]`, nil, MsgReq, "sé", "kinds must be an array", false)
	f(`["REQ","s",{}]  x`, nil, MsgReq, "s", "trailing data", false)
	f(`["REQ","s",{},]`, nil, MsgReq, "s", "filter must be a JSON object", false)
	f(`["REQ","`+strings.Repeat("x", 65)+`",{}]`, &Limits{MaxSubIDLen: 64}, MsgReq, "", "subscription id too long: 65 bytes (max 64)", true)
	f(`["REQ","s",{},{},{}]`, &Limits{MaxFilters: 2}, MsgReq, "s", "too many filters (max 2)", true)
	f(`["REQ","s",{"ids":[`+quotedList(3)+`]}]`, &Limits{MaxFilterValues: 2}, MsgReq, "s", "too many values in ids", true)
	// CLOSE, NEG-*.
	f(`["CLOSE"]`, nil, MsgClose, "", "missing subscription id", false)
	f(`["CLOSE","s","x"]`, nil, MsgClose, "s", "too many elements", false)
	f(`["CLOSE",null]`, nil, MsgClose, "", "subscription id must be a string", false)
	f(`["NEG-OPEN","n",{}]`, nil, MsgNegOpen, "n", "missing negentropy message", false)
	f(`["NEG-OPEN","n","abcd"]`, nil, MsgNegOpen, "n", "filter must be a JSON object", false)
	f(`["NEG-OPEN","n",{},"abc"]`, nil, MsgNegOpen, "n", "hex of even length", false)
	f(`["NEG-OPEN","n",{},"zz"]`, nil, MsgNegOpen, "n", "negentropy message must be hex", false)
	f(`["NEG-OPEN","n",{},12]`, nil, MsgNegOpen, "n", "negentropy message must be a hex string", false)
	f(`["NEG-MSG","n"]`, nil, MsgNegMsg, "n", "missing negentropy message", false)
	f(`["NEG-MSG","n","ab","cd"]`, nil, MsgNegMsg, "n", "too many elements", false)
	f(`["NEG-CLOSE","n",1]`, nil, MsgNegClose, "n", "too many elements", false)
}

func TestParseClientMessageEventID(t *testing.T) {
	// The id is reported when it was read before the error, so the relay
	// can answer with OK false.
	_, err := ParseClientMessage([]byte(`["EVENT",`+evWith(field{"kind", "70000"})+`]`), nil)
	pe := parseErr(t, err)
	if pe.Type != MsgEvent || !pe.HasEventID || pe.EventID.Hex() != hexID {
		t.Errorf("got Type %v HasEventID %v EventID %s", pe.Type, pe.HasEventID, pe.EventID)
	}
}

func TestParseClientMessagePrivate(t *testing.T) {
	in := []byte(`["REQ","sub-1",{"#t":["nostr"],"search":"q"}]`)
	m, err := ParseClientMessage(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	in2 := []byte(`["EVENT",` + evWith() + `]`)
	m2, err := ParseClientMessage(in2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'x'
	}
	for i := range in2 {
		in2[i] = 'x'
	}
	if m.SubID != "sub-1" || m.Filters[0].Tags[0].Values[0] != "nostr" || m.Filters[0].Search != "q" {
		t.Errorf("REQ aliases the input: %+v", m)
	}
	if m2.Event.Content != "hello" || m2.Event.Raw[0] != '{' {
		t.Errorf("EVENT aliases the input")
	}
	// The error's SubID does not alias the input either.
	in3 := []byte(`["REQ","keep",{"kinds":"x"}]`)
	_, err = ParseClientMessage(in3, nil)
	for i := range in3 {
		in3[i] = 'x'
	}
	if pe := parseErr(t, err); pe.SubID != "keep" {
		t.Errorf("ParseError.SubID aliases the input: %q", pe.SubID)
	}
}
