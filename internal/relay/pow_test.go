package relay

import (
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestDifficulty(t *testing.T) {
	f := func(hexID string, want int) {
		t.Helper()
		id, err := nostr.ParseID(hexID + strings.Repeat("f", 64-len(hexID)))
		if err != nil {
			t.Fatal(err)
		}
		if got := difficulty(&id); got != want {
			t.Fatalf("difficulty(%s...) = %d, want %d", hexID, got, want)
		}
	}
	f("", 0)
	f("7", 1)
	f("0f", 4)
	f("00", 8)
	f("01", 7)
	// NIP-13's example: 000000000e9d97a1... has difficulty 36.
	f("000000000e9d97a1ab09fc381030b346cdd7a142ad57e6df0b46dc9bef6c7e2d", 36)
	f(strings.Repeat("0", 64), 256)
}

func TestCheckPoW(t *testing.T) {
	id, _ := nostr.ParseID("000006d8c378af1779d2feebc7603a125d99eca0ccf1085959b307f64e5dd358") // 21 bits
	f := func(tags nostr.Tags, min int, want string) {
		t.Helper()
		rej := checkPoW(&nostr.Event{ID: id, Tags: tags}, min)
		got := ""
		if rej != nil {
			got = rej.Error()
		}
		if got != want {
			t.Fatalf("checkPoW(%v, %d) = %q, want %q", tags, min, got, want)
		}
	}
	f(nil, 21, "")
	f(nil, 22, "pow: difficulty 21 is less than 22")
	f(nostr.Tags{{"nonce", "776797", "20"}}, 20, "")
	f(nostr.Tags{{"nonce", "776797", "20"}}, 21, "pow: committed target difficulty 20 is less than 21")
	f(nostr.Tags{{"nonce", "776797"}}, 21, "")                       // no commitment: not held against it
	f(nostr.Tags{{"nonce", "776797", "x"}}, 21, "")                  // not a number: ignored
	f(nostr.Tags{{"nonce", "1", "30"}, {"nonce", "1", "1"}}, 21, "") // the first nonce tag counts
}

func TestEmbedsProtected(t *testing.T) {
	k := nostr.SecretKeyFromSeed([]byte("embed"))
	ev := func(tags nostr.Tags) string {
		e := &nostr.Event{Kind: 1, Tags: tags, CreatedAt: 1700000000}
		nostr.SignEvent(e, k)
		return string(e.Raw)
	}
	f := func(content string, want bool) {
		t.Helper()
		if got := embedsProtected(content); got != want {
			t.Fatalf("embedsProtected(%.60q) = %v, want %v", content, got, want)
		}
	}
	f(ev(nostr.Tags{{"-"}}), true)
	f(ev(nostr.Tags{{"e", "x"}, {"-"}}), true)
	f(ev(nostr.Tags{{"t", "-"}}), false)
	f(ev(nil), false)
	f("", false)
	f("not json", false)
	f(`{"tags":[["-"]]}`, true)                    // not an event, but carries the tag
	f(`{"tags":[["\u002d"]],"content":"x"}`, true) // escaped
	f(`{"tags":[["-","x"]]}`, false)
	f(`{"tags":"-"}`, false)
}

func FuzzEmbedsProtected(f *testing.F) {
	for _, s := range []string{"", "{}", `{"tags":[["-"]]}`, `{"tags":[["\u002d"]]}`, `{"id":"x","tags":[[1,"-"]]}`, `{"tags":[["-"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := embedsProtected(s)
		// Without a "-" string anywhere, nothing can be protected.
		if got && !strings.Contains(s, `"-"`) && !strings.Contains(s, `\u002d`) && !strings.Contains(s, `\u002D`) {
			t.Fatalf("embedsProtected(%q) without a dash", s)
		}
	})
}
