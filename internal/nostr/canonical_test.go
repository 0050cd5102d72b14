package nostr

import (
	"crypto/sha256"
	"strings"
	"testing"
)

func TestAppendString(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
	}
	f("", `""`)
	f("plain", `"plain"`)
	f("\n", `"\n"`)
	f("\"", `"\""`)
	f("\\", `"\\"`)
	f("\r", `"\r"`)
	f("\t", `"\t"`)
	f("\b", `"\b"`)
	f("\f", `"\f"`)
	f("\x00", `"\u0000"`)
	f("\x01\x1f\x0b\x1a", `"\u0001\u001f\u000b\u001a"`)
	f("\x7f", "\"\x7f\"")
	f("/", `"/"`)
	f("<>&'", `"<>&'"`)
	f("é€中😀", `"é€中😀"`)
	f("\u2028\u2029", "\"\u2028\u2029\"")
	f("a\"b\\c\nd", `"a\"b\\c\nd"`)
	f("0123456789abcdef\n0123456789abcdef", `"0123456789abcdef\n0123456789abcdef"`)

	// A character that needs escaping at every offset around the 8-byte
	// blocks of the fast path.
	for _, c := range []string{"\n", "\"", "\\", "\x01", "\x1f"} {
		esc := string(AppendString(nil, c))
		esc = esc[1 : len(esc)-1]
		for n := 0; n < 20; n++ {
			for pos := 0; pos <= n; pos++ {
				in := strings.Repeat("a", pos) + c + strings.Repeat("é", (n-pos)/2) + strings.Repeat("b", (n-pos)%2)
				want := `"` + strings.Repeat("a", pos) + esc + strings.Repeat("é", (n-pos)/2) + strings.Repeat("b", (n-pos)%2) + `"`
				f(in, want)
			}
		}
	}
	if got := string(AppendString([]byte("x"), "y")); got != `x"y"` {
		t.Errorf("AppendString does not append: %s", got)
	}
}

// TestCanonicalHandBuilt checks AppendCanonical and ComputeID against a
// canonical form written out by hand from the NIP-01 rules, for an event
// whose input escaping differs from the canonical one (\u00e9, \/, \u escapes
// of characters NIP-01 writes verbatim).
func TestCanonicalHandBuilt(t *testing.T) {
	in := evWith(
		field{"created_at", "1700000000"},
		field{"kind", "30023"},
		field{"tags", `[["d","a\/b"],["t","caf\u00e9"],[],["x","\u003c\u0026\u003e","\u2028"]]`},
		field{"content", `"caf\u00e9 \/ <&> ` + "\u2028" + ` line\nnew \"q\" \\ \t\b\f\r \u0001\u001F\u007f \ud83d\ude00 €"`},
	)
	ev, err := ParseEvent([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `[0,"` + hexPK + `",1700000000,30023,[["d","a/b"],["t","café"],[],["x","<&>","` + "\u2028" + `"]],` +
		`"café / <&> ` + "\u2028" + ` line\nnew \"q\" \\ \t\b\f\r \u0001\u001f` + "\x7f" + ` 😀 €"]`
	if got := string(AppendCanonical(nil, ev)); got != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	if got, want := ComputeID(ev), ID(sha256.Sum256([]byte(want))); got != want {
		t.Errorf("ComputeID = %s, want %s", got, want)
	}

	// The same event written with the other escaping has the same id.
	in2 := evWith(
		field{"created_at", "1700000000"},
		field{"kind", "30023"},
		field{"tags", `[["d","a/b"],["t","café"],[],["x","<&>","` + "\u2028" + `"]]`},
		field{"content", `"café / <&> ` + "\u2028" + ` line\nnew \"q\" \\ \t\u0008\u000c\u000D \u0001\u001f` + "\x7f" + ` 😀 \u20ac"`},
	)
	ev2, err := ParseEvent([]byte(in2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ComputeID(ev2) != ComputeID(ev) {
		t.Errorf("differently escaped inputs give different ids:\n%s\n%s", AppendCanonical(nil, ev), AppendCanonical(nil, ev2))
	}
}

func TestCanonicalEmpty(t *testing.T) {
	ev := &Event{}
	want := `[0,"0000000000000000000000000000000000000000000000000000000000000000",0,0,[],""]`
	if got := string(AppendCanonical(nil, ev)); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if ComputeID(ev) != ID(sha256.Sum256([]byte(want))) {
		t.Error("ComputeID of the empty event")
	}
}

func TestComputeIDLargeEvent(t *testing.T) {
	// Above the stack buffer: the pooled path, with and without Raw.
	ev := typicalEvent()
	ev.Content = strings.Repeat("long\ncontent ", 1000)
	for range 600 {
		ev.Tags = append(ev.Tags, Tag{"p", hexPK})
	}
	want := ID(sha256.Sum256(refCanonical(t, ev)))
	ev.Raw = nil
	if got := ComputeID(ev); got != want {
		t.Errorf("without Raw: %s, want %s", got, want)
	}
	ev.Raw = Serialize(ev)
	if got := ComputeID(ev); got != want {
		t.Errorf("with Raw: %s, want %s", got, want)
	}
	// A stale, short Raw must not matter.
	ev.Raw = []byte("{}")
	if got := ComputeID(ev); got != want {
		t.Errorf("with stale Raw: %s, want %s", got, want)
	}
	ev.ID = want
	if !CheckID(ev) {
		t.Error("CheckID false")
	}
	ev.ID[0] ^= 1
	if CheckID(ev) {
		t.Error("CheckID true for a wrong id")
	}
}

func TestComputeIDAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	small := typicalEvent()
	large := typicalEvent()
	large.Content = strings.Repeat("x", 10000)
	large.Raw = Serialize(large)
	for name, ev := range map[string]*Event{"typical": small, "large": large} {
		if n := testing.AllocsPerRun(100, func() { ComputeID(ev) }); n != 0 {
			t.Errorf("ComputeID(%s): %.1f allocations, want 0", name, n)
		}
	}
}
