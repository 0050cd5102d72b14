package relay

import (
	"encoding/json"
	"testing"
	"unsafe"
)

// TestSizes pins the sizes of the structures every connection holds: a
// Session per connection and a sub per subscription. Go allocates them in
// size classes (..., 256, 288, 320, 352, ...), so one field too many
// moves a struct to the next class and costs 32 bytes per connection
// (docs/BENCHMARKS.md, bar 4). If a field must be added, reorder or shrink
// others first, or raise the limit here knowingly.
func TestSizes(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 320 {
		t.Errorf("Session is %d bytes, over the 320-byte size class", n)
	}
	if n := unsafe.Sizeof(sub{}); n > 288 {
		t.Errorf("sub is %d bytes, over the 288-byte size class", n)
	}
}

// TestSubIDSharesPrefix checks that a subscription id that needs no JSON
// escaping is kept inside the EVENT prefix (one allocation, not two), and
// that an id that does need escaping keeps its own exact value.
func TestSubIDSharesPrefix(t *testing.T) {
	for _, id := range []string{"feed", `a"b`, "tab\there", "ünï"} {
		var sb sub
		sb.setID(id)
		if sb.id != id {
			t.Errorf("id %q: sub id %q", id, sb.id)
		}
		want := `["EVENT",` + jsonString(id) + ","
		if sb.prefix != want {
			t.Errorf("id %q: prefix %q, want %q", id, sb.prefix, want)
		}
		shared := unsafe.StringData(sb.id) == unsafe.StringData(sb.prefix[10:])
		if escapes := len(want) != len(id)+12; shared == escapes {
			t.Errorf("id %q: shares prefix bytes = %v, want %v", id, shared, !escapes)
		}
	}
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
