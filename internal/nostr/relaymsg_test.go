package nostr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestRelayMessageBuilders(t *testing.T) {
	id := mustID(hexID)
	raw := []byte(evWith())
	f := func(got []byte, want string) {
		t.Helper()
		if string(got) != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		if !json.Valid(got) {
			t.Errorf("invalid JSON: %s", got)
		}
	}
	f(AppendEventFrame(nil, "sub", raw), `["EVENT","sub",`+string(raw)+`]`)
	f(AppendEventFrame(nil, "a\"b\n", raw), `["EVENT","a\"b\n",`+string(raw)+`]`)
	f(AppendOK(nil, id, true, ""), `["OK","`+hexID+`",true,""]`)
	f(AppendOK(nil, id, false, "invalid: bad \"sig\""), `["OK","`+hexID+`",false,"invalid: bad \"sig\""]`)
	f(AppendEOSE(nil, "s"), `["EOSE","s"]`)
	f(AppendClosed(nil, "s", "error: shutting down"), `["CLOSED","s","error: shutting down"]`)
	f(AppendNotice(nil, "hi\tthere"), `["NOTICE","hi\tthere"]`)
	f(AppendCount(nil, "c", 42, false, nil), `["COUNT","c",{"count":42}]`)
	f(AppendCount(nil, "c", 0, true, nil), `["COUNT","c",{"count":0,"approximate":true}]`)
	f(AppendCount(nil, "c", 7, true, []byte{0, 1, 0xff}), `["COUNT","c",{"count":7,"approximate":true,"hll":"0001ff"}]`)
	f(AppendCount(nil, "c", 7, false, []byte{}), `["COUNT","c",{"count":7,"hll":""}]`)
	f(AppendAuthChallenge(nil, "chal-123"), `["AUTH","chal-123"]`)
	f(AppendNegMsg(nil, "n", []byte{0x61, 0x00}), `["NEG-MSG","n","6100"]`)
	f(AppendNegMsg(nil, "n", nil), `["NEG-MSG","n",""]`)
	f(AppendNegErr(nil, "n", "blocked: too many records"), `["NEG-ERR","n","blocked: too many records"]`)
	// Appending keeps what dst held.
	f(AppendEOSE(AppendEOSE(nil, "a")[:0], "b"), `["EOSE","b"]`)
	if got := string(AppendNotice([]byte("x"), "y")); got != `x["NOTICE","y"]` {
		t.Errorf("AppendNotice does not append: %s", got)
	}
}

func TestRelayMessageBuildersAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	raw := typicalEvent().Raw
	buf := make([]byte, 0, 4096)
	var id ID
	n := testing.AllocsPerRun(100, func() {
		buf = AppendEventFrame(buf[:0], "sub", raw)
		buf = AppendOK(buf, id, false, "invalid: x")
		buf = AppendEOSE(buf, "sub")
		buf = AppendClosed(buf, "sub", "error: x")
		buf = AppendNotice(buf, "n")
		buf = AppendCount(buf, "sub", 5, true, []byte{1, 2})
		buf = AppendAuthChallenge(buf, "c")
		buf = AppendNegMsg(buf, "sub", []byte{1, 2, 3})
		buf = AppendNegErr(buf, "sub", "closed")
	})
	if n != 0 {
		t.Errorf("builders allocate %.1f times with room in dst", n)
	}
}

func TestParseRelayMessageRoundTrip(t *testing.T) {
	ev := typicalEvent()
	id := mustID(hexID)
	f := func(in []byte, want RelayMessage) {
		t.Helper()
		got, err := ParseRelayMessage(in)
		if err != nil {
			t.Errorf("ParseRelayMessage(%.80s): %v", in, err)
			return
		}
		if want.Type == LabelEvent {
			if got.Event == nil || !eventsEqual(got.Event, ev) || !bytes.Equal(got.RawEvent, ev.Raw) || !bytes.Equal(got.Event.Raw, ev.Raw) {
				t.Errorf("EVENT: got %+v", got)
			}
			got.Event, got.RawEvent = nil, nil
		}
		if got.Type != want.Type || got.SubID != want.SubID || got.EventID != want.EventID || got.OK != want.OK ||
			got.Message != want.Message || got.Count != want.Count || got.Approximate != want.Approximate ||
			!bytes.Equal(got.HLL, want.HLL) || !bytes.Equal(got.NegPayload, want.NegPayload) ||
			(got.HLL == nil) != (want.HLL == nil) {
			t.Errorf("ParseRelayMessage(%.80s)\n got %+v\nwant %+v", in, *got, want)
		}
	}
	f(AppendEventFrame(nil, "sub\u00e9", ev.Raw), RelayMessage{Type: LabelEvent, SubID: "subé"})
	f(AppendOK(nil, id, true, ""), RelayMessage{Type: LabelOK, EventID: id, OK: true})
	f(AppendOK(nil, id, false, "blocked: \"no\""), RelayMessage{Type: LabelOK, EventID: id, Message: `blocked: "no"`})
	f(AppendEOSE(nil, "s"), RelayMessage{Type: LabelEOSE, SubID: "s"})
	f(AppendClosed(nil, "s", "error: x"), RelayMessage{Type: LabelClosed, SubID: "s", Message: "error: x"})
	f(AppendNotice(nil, "hello\n"), RelayMessage{Type: LabelNotice, Message: "hello\n"})
	f(AppendCount(nil, "c", 1<<40, true, []byte{9, 8}), RelayMessage{Type: LabelCount, SubID: "c", Count: 1 << 40, Approximate: true, HLL: []byte{9, 8}})
	f(AppendCount(nil, "c", 3, false, nil), RelayMessage{Type: LabelCount, SubID: "c", Count: 3})
	f([]byte(`["COUNT","c",{"extra":[1],"approximate":false,"count":5}]`), RelayMessage{Type: LabelCount, SubID: "c", Count: 5})
	f(AppendAuthChallenge(nil, "chal"), RelayMessage{Type: LabelAuth, Message: "chal"})
	f(AppendNegMsg(nil, "n", []byte{1, 2}), RelayMessage{Type: LabelNegMsg, SubID: "n", NegPayload: []byte{1, 2}})
	f(AppendNegErr(nil, "n", "closed: bye"), RelayMessage{Type: LabelNegErr, SubID: "n", Message: "closed: bye"})
	f([]byte(" [ \"EOSE\" , \"s\" ] \n"), RelayMessage{Type: LabelEOSE, SubID: "s"})
}

func TestParseRelayMessageRejects(t *testing.T) {
	f := func(in, wantMsg string) {
		t.Helper()
		m, err := ParseRelayMessage([]byte(in))
		if err == nil {
			t.Errorf("ParseRelayMessage(%.80s) accepted: %+v", in, m)
			return
		}
		if pe := parseErr(t, err); !strings.Contains(pe.Msg, wantMsg) {
			t.Errorf("ParseRelayMessage(%.80s): error %q does not contain %q", in, pe.Msg, wantMsg)
		}
	}
	f(``, "message must be a JSON array")
	f(`["BOGUS"]`, `unknown message type "BOGUS"`)
	f(`["EVENT","s"]`, "EVENT: missing event")
	f(`["EVENT","s",{}]`, `missing field "id"`)
	f(`["EVENT",1,{}]`, "EVENT: subscription id must be a string")
	f(`["EVENT","s",`+evWith()+`,1]`, "EVENT: too many elements")
	f(`["OK","`+hexID+`",true]`, "OK: missing message")
	f(`["OK","`+hexID+`","true",""]`, "OK: status must be a boolean")
	f(`["OK","abc",true,""]`, "OK: event id must be 64 lowercase hex")
	f(`["EOSE"]`, "EOSE: missing first argument")
	f(`["EOSE","s","t"]`, "EOSE: too many elements")
	f(`["CLOSED","s"]`, "CLOSED: missing message")
	f(`["NOTICE",1]`, "NOTICE: message must be a string")
	f(`["COUNT","c",{}]`, `COUNT: missing "count"`)
	f(`["COUNT","c",{"count":-1}]`, "COUNT: count must not be negative")
	f(`["COUNT","c",{"count":1,"hll":"x"}]`, "COUNT: hll must be hex")
	f(`["COUNT","c",5]`, "COUNT: result must be an object")
	f(`["NEG-MSG","n","xyz"]`, "NEG-MSG: payload must be hex")
	f(`["EOSE","s"]]`, "trailing data")
}

func TestParseRelayMessagePrivate(t *testing.T) {
	in := AppendClosed(nil, "sub", "error: x")
	in2 := AppendEventFrame(nil, "sub2", typicalEvent().Raw)
	m, err := ParseRelayMessage(in)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ParseRelayMessage(in2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'x'
	}
	for i := range in2 {
		in2[i] = 'x'
	}
	if m.SubID != "sub" || m.Message != "error: x" || m2.SubID != "sub2" || m2.Event.Tags[0][0] != "e" {
		t.Errorf("relay message aliases the input: %+v %+v", m, m2)
	}
}
