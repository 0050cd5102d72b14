package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestFastEvent(t *testing.T) {
	g := NewGenerator(GenConfig{Seed: 9, Start: 1_700_000_000})
	ev := g.Event(0)
	frame := string(nostr.AppendEventFrame(nil, "sub1", ev.Raw))
	f := func(in string, ok bool, sub string) {
		t.Helper()
		m, got := fastEvent([]byte(in))
		if got != ok {
			t.Fatalf("fastEvent(%.60q) ok=%v, want %v", in, got, ok)
		}
		if ok && (m.SubID != sub || m.EventID != ev.ID || m.Type != nostr.LabelEvent || m.Event != nil) {
			t.Fatalf("fastEvent(%.60q) = %+v", in, m)
		}
	}
	f(frame, true, "sub1")
	f(string(nostr.AppendEventFrame(nil, "", ev.Raw)), true, "")
	f(string(nostr.AppendEventFrame(nil, `a"b`, ev.Raw)), false, "") // escaped quote in the sub id
	f(string(nostr.AppendEventFrame(nil, `a\b`, ev.Raw)), false, "") // escaped backslash
	f(`["EOSE","sub1"]`, false, "")
	f(`["OK","`+ev.ID.Hex()+`",true,""]`, false, "")
	f(`["EVENT","sub1",{"id" : "`+ev.ID.Hex()+`"}]`, false, "") // spaces: left to the parser
	f(`["EVENT","sub1",{"id":"`+strings.ToUpper(ev.ID.Hex())+`"}]`, false, "")
	f(`["EVENT","sub1",{"id":"`+ev.ID.Hex()[:63]+`"}]`, false, "")
	f(`["EVENT","sub1",{"id":"`+ev.ID.Hex()[:63]+`x"}]`, false, "")
	f(`["EVENT","sub1",{"id":"`+ev.ID.Hex()+`"}`, false, "") // no closing bracket
	f(`["EVENT","sub1"]`, false, "")
	f(`["EVENT",`, false, "")
}

// FuzzFastEvent checks that the fast path never disagrees with the full
// parser on a message both accept.
func FuzzFastEvent(f *testing.F) {
	g := NewGenerator(GenConfig{Seed: 9, Start: 1_700_000_000})
	for i := 0; i < 3; i++ {
		f.Add(nostr.AppendEventFrame(nil, "s", g.Event(i).Raw))
	}
	f.Add([]byte(`["EVENT","x",{"content":"\"id\":\"00","id":"` + strings.Repeat("a", 64) + `"}]`))
	f.Add([]byte(`["EOSE","x"]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ok := fastEvent(data)
		if !ok {
			return
		}
		full, err := nostr.ParseRelayMessage(data)
		if err != nil {
			return // the fast path does not validate the event body
		}
		if full.Type != m.Type || full.SubID != m.SubID || full.Event.ID != m.EventID {
			t.Fatalf("fast %q/%x, full %q/%x", m.SubID, m.EventID, full.SubID, full.Event.ID)
		}
	})
}

func TestReadAll(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	got, err := readAll(bytes.NewReader(data), make([]byte, 0, 7))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("readAll: %d bytes, %v", len(got), err)
	}
	got, err = readAll(bytes.NewReader(nil), got[:0])
	if err != nil || len(got) != 0 {
		t.Fatalf("readAll empty: %d bytes, %v", len(got), err)
	}
}
