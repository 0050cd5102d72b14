package nostr

import (
	"strings"
	"testing"
)

// TestRecoverEventID: an EVENT refused before its id was read (a malformed
// field precedes the id) still names the id, so the relay can answer
// with an OK; a malformed id, or none, is not invented.
func TestRecoverEventID(t *testing.T) {
	const id = "7f8e1c2d3b4a59687766554433221100ffeeddccbbaa99887766554433221100"
	rest := `,"pubkey":"` + strings.Repeat("ab", 32) + `","created_at":1700000000,"tags":[],"content":"x","sig":"` + strings.Repeat("cd", 64) + `"}`
	f := func(name, field string, want bool) {
		t.Helper()
		msg := `["EVENT",{` + field + `,"id":"` + id + `"` + rest + `]`
		_, err := ParseClientMessage([]byte(msg), nil)
		pe, ok := err.(*ParseError)
		if !ok {
			t.Fatalf("%s: err %v, want a ParseError", name, err)
		}
		if pe.HasEventID != want || (want && pe.EventID.Hex() != id) {
			t.Fatalf("%s: HasEventID %v (%s), want %v; msg %q", name, pe.HasEventID, pe.EventID.Hex(), want, pe.Msg)
		}
	}
	deep := `"tags":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	many := `"tags":[` + strings.TrimSuffix(strings.Repeat(`["t","x"],`, 2001), ",") + `]`
	for _, c := range []struct{ name, field string }{
		{"kind string", `"kind":"1"`},
		{"kind fraction", `"kind":1.5`},
		{"kind negative", `"kind":-1`},
		{"kind huge", `"kind":1180591620717411303424`},
		{"created_at string", `"kind":1,"created_at":"1"`},
		{"created_at exponent", `"kind":1,"created_at":1e20`},
		{"created_at negative", `"kind":1,"created_at":-5`},
		{"tags string", `"kind":1,"tags":"x"`},
		{"tag number", `"kind":1,"tags":[["p",1]]`},
		{"tag null", `"kind":1,"tags":[["p",null]]`},
		{"tag object", `"kind":1,"tags":[{}]`},
		{"content number", `"kind":1,"content":5`},
		{"uppercase pubkey", `"kind":1,"pubkey":"` + strings.Repeat("AB", 32) + `"`},
		{"lone surrogate", `"kind":1,"content":"\ud800"`},
		{"deep tags", `"kind":1,` + deep},
		{"2001 tags", `"kind":1,` + many},
		{"escaped quote in a string", `"kind":1,"content":"a\"b\\"`},
	} {
		f(c.name, c.field, true)
	}
	// Not an id to name: malformed, escaped key, nested, or absent.
	g := func(name, obj string) {
		t.Helper()
		_, err := ParseClientMessage([]byte(`["EVENT",`+obj+`]`), nil)
		if pe, ok := err.(*ParseError); !ok || pe.HasEventID {
			t.Fatalf("%s: %v, want a ParseError without an id", name, err)
		}
	}
	g("uppercase id", `{"kind":"1","id":"`+strings.ToUpper(id)+`"}`)
	g("short id", `{"kind":"1","id":"abcd"}`)
	g("id in tags", `{"kind":"1","tags":[["id","`+id+`"]]}`)
	g("escaped key", `{"kind":"1","\u0069d":"`+id+`"}`)
	g("no id", `{"kind":"1"}`)
	g("truncated", `{"kind":"1","content":"`)
}

func FuzzRecoverEventID(f *testing.F) {
	f.Add([]byte(`{"kind":"1","id":"7f8e1c2d3b4a59687766554433221100ffeeddccbbaa99887766554433221100"}`))
	f.Add([]byte(`{"a":[[[{"b":"\\\""}]]],"id":"00"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, d []byte) {
		id, ok := recoverEventID(d)
		if ok && !strings.Contains(string(d), `"id"`) {
			t.Fatalf("recovered %s from input without an id key", id.Hex())
		}
		if ok && !strings.Contains(string(d), id.Hex()) {
			t.Fatalf("recovered %s, not in the input", id.Hex())
		}
	})
}
