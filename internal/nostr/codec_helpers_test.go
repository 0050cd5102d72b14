package nostr

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// Hex values used to build test events.
const (
	hexID  = "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36"
	hexPK  = "f7234bd4c1394dda46d09f35bd384dd30cc552ad5541990f98844fb06676e9ca"
	hexSig = "908a15e46fb4d8675bab026fc230a0e3542bfade63da02d542fb78b2a8513fcd0092619a2c8c1221e581946e0191f2af505dfdf8657a414dbca329186f009262"
)

// field is one member of a test event object; a Value of "" drops it.
type field struct{ Key, Value string }

// baseFields is a well-formed event (its id does not match: parsing does
// not check ids).
var baseFields = []field{
	{"id", `"` + hexID + `"`},
	{"pubkey", `"` + hexPK + `"`},
	{"created_at", "1700000000"},
	{"kind", "1"},
	{"tags", `[["e","` + hexID + `"],["p","` + hexPK + `","wss://r.example"]]`},
	{"content", `"hello"`},
	{"sig", `"` + hexSig + `"`},
}

// evWith returns baseFields with the given members replaced (or dropped when
// the value is ""); keys not in baseFields are appended in order.
func evWith(set ...field) string {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	add := func(k, v string) {
		if v == "" {
			return
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		b.WriteString(v)
	}
	used := make([]bool, len(set))
	for _, f := range baseFields {
		v := f.Value
		for i, s := range set {
			if s.Key == f.Key && !used[i] {
				v, used[i] = s.Value, true
				break
			}
		}
		add(f.Key, v)
	}
	for i, s := range set {
		if !used[i] {
			add(s.Key, s.Value)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// withinRaw reports whether s points into the allocation backing raw
// (including the decoded strings stored past its capacity).
func withinRaw(s string, raw []byte) bool {
	if len(s) == 0 {
		return true
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	return p >= lo && p+uintptr(len(s)) <= lo+2*uintptr(len(raw))+64
}

// eventsEqual compares the content fields of two events (not Raw).
func eventsEqual(a, b *Event) bool {
	if a.ID != b.ID || a.PubKey != b.PubKey || a.Sig != b.Sig || a.CreatedAt != b.CreatedAt ||
		a.Kind != b.Kind || a.Content != b.Content || len(a.Tags) != len(b.Tags) {
		return false
	}
	for i := range a.Tags {
		if !reflect.DeepEqual([]string(a.Tags[i]), []string(b.Tags[i])) &&
			!(len(a.Tags[i]) == 0 && len(b.Tags[i]) == 0) {
			return false
		}
	}
	return true
}

// jsonEvent is the encoding/json model of an event, for differential tests.
type jsonEvent struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

func toJSONEvent(ev *Event) jsonEvent {
	tags := make([][]string, len(ev.Tags))
	for i, t := range ev.Tags {
		tags[i] = append([]string{}, t...)
	}
	return jsonEvent{ev.ID.Hex(), ev.PubKey.Hex(), ev.CreatedAt, ev.Kind, tags, ev.Content, ev.Sig.Hex()}
}

// fromJSONEvent converts the encoding/json model back, or reports false if
// its hex fields are malformed.
func fromJSONEvent(j *jsonEvent) (*Event, bool) {
	ev := &Event{CreatedAt: j.CreatedAt, Kind: j.Kind, Content: j.Content}
	var err1, err2, err3 error
	ev.ID, err1 = ParseID(j.ID)
	ev.PubKey, err2 = ParsePubKey(j.PubKey)
	ev.Sig, err3 = ParseSig(j.Sig)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, false
	}
	for _, t := range j.Tags {
		ev.Tags = append(ev.Tags, Tag(t))
	}
	return ev, true
}

// refCanonical builds the canonical serialization with encoding/json (no
// HTML escaping) and then undoes the two escapes encoding/json adds that
// NIP-01 does not: \u2028 and \u2029 must be verbatim. It is an independent
// implementation to compare AppendCanonical against.
func refCanonical(t testing.TB, ev *Event) []byte {
	t.Helper()
	tags := make([][]string, len(ev.Tags))
	for i, tg := range ev.Tags {
		tags[i] = append([]string{}, tg...)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode([]any{0, ev.PubKey.Hex(), ev.CreatedAt, ev.Kind, tags, ev.Content}); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	// Replace \u2028 and \u2029 escapes that are real escapes (preceded by
	// an even number of backslashes).
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+5]) == "202" && (b[i+5] == '8' || b[i+5] == '9') {
			if b[i+5] == '8' {
				out = append(out, "\u2028"...)
			} else {
				out = append(out, "\u2029"...)
			}
			i += 5
			continue
		}
		if b[i] == '\\' { // copy any other escape pair whole
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}

// runePool is what random strings are drawn from: the characters that need
// escaping, the ones encoding/json escapes but NIP-01 does not, multi-byte
// runes of every length and the extremes.
var runePool = []rune{
	'a', 'b', 'z', 'A', ' ', '0', '9', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f',
	0x00, 0x01, 0x1f, 0x7f, '<', '>', '&', 'é', 'ß', '€', '中', '😀', 0x2028, 0x2029,
	0xfffd, 0xffff, 0x10ffff, 0x80, 0x7ff, 0x800,
}

func randString(r *rand.Rand, maxLen int) string {
	n := r.IntN(maxLen + 1)
	var b strings.Builder
	for range n {
		if r.IntN(3) == 0 {
			b.WriteRune(runePool[r.IntN(len(runePool))])
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func randEvent(r *rand.Rand) *Event {
	ev := &Event{
		CreatedAt: r.Int64N(MaxTimestamp + 1),
		Kind:      r.IntN(MaxKind + 1),
		Content:   randString(r, 80),
	}
	switch r.IntN(4) {
	case 0:
		ev.CreatedAt = 0
	case 1:
		ev.CreatedAt = MaxTimestamp
	case 2:
		ev.CreatedAt = 1600000000 + r.Int64N(200000000)
	}
	for i := range ev.ID {
		ev.ID[i] = byte(r.Uint32())
		ev.PubKey[i] = byte(r.Uint32())
	}
	for i := range ev.Sig {
		ev.Sig[i] = byte(r.Uint32())
	}
	nt := r.IntN(6)
	if nt > 0 {
		ev.Tags = make(Tags, nt)
	}
	for i := range nt {
		ne := r.IntN(4)
		t := make(Tag, ne)
		for j := range t {
			t[j] = randString(r, 20)
		}
		ev.Tags[i] = t
	}
	return ev
}

// typicalEvent is a kind-1 note with 5 tags and 200 bytes of plain content,
// the shape the benchmarks call "typical".
func typicalEvent() *Event {
	ev := &Event{
		CreatedAt: 1700000000,
		Kind:      1,
		Tags: Tags{
			{"e", hexID, "wss://relay.example.com", "root"},
			{"e", "6b6c7f6e0e5a2a3e4a3f1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a", "", "reply"},
			{"p", hexPK},
			{"p", "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"},
			{"t", "nostr"},
		},
		Content: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 5)[:200],
	}
	ev.ID, _ = ParseID(hexID)
	ev.PubKey, _ = ParsePubKey(hexPK)
	ev.Sig, _ = ParseSig(hexSig)
	ev.ID = ComputeID(ev)
	ev.Raw = Serialize(ev)
	return ev
}

// parseErr asserts that err is a *ParseError and returns it.
func parseErr(t *testing.T, err error) *ParseError {
	t.Helper()
	pe, ok := err.(*ParseError)
	if !ok {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	return pe
}
