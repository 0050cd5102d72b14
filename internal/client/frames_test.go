package client

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// parseClient parses a built frame as the relay would, failing the test
// on error.
func parseClient(t testing.TB, frame []byte) *nostr.ClientMessage {
	t.Helper()
	m, err := nostr.ParseClientMessage(frame, nil)
	if err != nil {
		t.Fatalf("%s: %v", frame, err)
	}
	return m
}

// sameFilters reports whether two filter lists serialize alike.
func sameFilters(a, b []nostr.Filter) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(nostr.AppendFilter(nil, &a[i]), nostr.AppendFilter(nil, &b[i])) {
			return false
		}
	}
	return true
}

// TestFrames: every client frame the package builds parses back, with the
// relay's own parser, into what it was built from.
func TestFrames(t *testing.T) {
	k := nostr.SecretKeyFromSeed([]byte("frames"))
	ev := &nostr.Event{Kind: 1, CreatedAt: 1_700_000_000, Content: "a \"quoted\"\nline", Tags: nostr.Tags{{"t", "x"}}}
	nostr.SignEvent(ev, k)
	filters := []nostr.Filter{
		{Kinds: []int{1, 7}, Present: nostr.PresentKinds, Since: 10, HasSince: true, Limit: 5, HasLimit: true},
		{IDs: []nostr.ID{ev.ID}, Present: nostr.PresentIDs, Tags: []nostr.TagFilter{{Name: 't', Values: []string{"x", "y"}}}},
		{},
	}
	const sub = "sub \"1\"\t\u00e9"

	req := func(label string, typ nostr.MsgType, fs []nostr.Filter) {
		t.Helper()
		m := parseClient(t, appendFilters(nil, label, sub, fs))
		if m.Type != typ || m.SubID != sub || !sameFilters(m.Filters, fs) {
			t.Fatalf("%s: %+v", label, m)
		}
	}
	req("REQ", nostr.MsgReq, filters)
	req("REQ", nostr.MsgReq, filters[2:])
	req("COUNT", nostr.MsgCount, filters[:1])

	end := func(label string, typ nostr.MsgType) {
		t.Helper()
		if m := parseClient(t, appendSubEnd(nil, label, sub)); m.Type != typ || m.SubID != sub {
			t.Fatalf("%s: %+v", label, m)
		}
	}
	end("CLOSE", nostr.MsgClose)
	end("NEG-CLOSE", nostr.MsgNegClose)

	event := func(label string, typ nostr.MsgType, e *nostr.Event) {
		t.Helper()
		m := parseClient(t, appendEventMsg(nil, label, e))
		if m.Type != typ || m.Event.ID != ev.ID || !bytes.Equal(m.Event.Raw, ev.Raw) {
			t.Fatalf("%s: %+v", label, m)
		}
	}
	event("EVENT", nostr.MsgEvent, ev)
	event("AUTH", nostr.MsgAuth, ev)
	noRaw := *ev
	noRaw.Raw = nil // serialized on the way
	event("EVENT", nostr.MsgEvent, &noRaw)

	payload := []byte{0x61, 0x00, 0xff, 0x10}
	m := parseClient(t, appendNegOpen(nil, sub, &filters[0], payload))
	if m.Type != nostr.MsgNegOpen || m.SubID != sub || !sameFilters(m.Filters, filters[:1]) || !bytes.Equal(m.NegPayload, payload) {
		t.Fatalf("NEG-OPEN: %+v", m)
	}
	m = parseClient(t, nostr.AppendNegMsg(nil, sub, payload))
	if m.Type != nostr.MsgNegMsg || m.SubID != sub || !bytes.Equal(m.NegPayload, payload) {
		t.Fatalf("NEG-MSG: %+v", m)
	}
}

// FuzzFrames: for any subscription id, filter and payload, the frames
// built parse back into the same values.
func FuzzFrames(f *testing.F) {
	f.Add("s", []byte(`{"kinds":[1],"#t":["x"]}`), []byte{0x61})
	f.Add("a\"b\\c\u2028", []byte(`{}`), []byte{})
	f.Add("\x00\x1f", []byte(`{"ids":[],"since":0,"limit":0}`), []byte{0xff, 0})
	f.Fuzz(func(t *testing.T, sub string, filterJSON, payload []byte) {
		if sub == "" || !utf8.ValidString(sub) {
			return // not a subscription id the relay accepts
		}
		flt, err := nostr.ParseFilter(filterJSON, nil)
		if err != nil {
			return
		}
		fs := []nostr.Filter{flt}
		m := parseClient(t, appendFilters(nil, "REQ", sub, fs))
		if m.Type != nostr.MsgReq || m.SubID != sub || !sameFilters(m.Filters, fs) {
			t.Fatalf("REQ: %+v", m)
		}
		m = parseClient(t, appendNegOpen(nil, sub, &flt, payload))
		if m.Type != nostr.MsgNegOpen || m.SubID != sub || !sameFilters(m.Filters, fs) || !bytes.Equal(m.NegPayload, payload) {
			t.Fatalf("NEG-OPEN: %+v", m)
		}
		m = parseClient(t, appendSubEnd(nil, "CLOSE", sub))
		if m.Type != nostr.MsgClose || m.SubID != sub {
			t.Fatalf("CLOSE: %+v", m)
		}
	})
}
