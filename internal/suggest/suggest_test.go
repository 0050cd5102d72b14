package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"kinds", "kinds", 0}, {"kind", "kinds", 1}, {"authrs", "authors", 1},
		{"", "abc", 3}, {"abc", "", 3}, {"max_limt", "max_limit", 1}, {"kitten", "sitting", 3},
	} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"ids", "authors", "kinds", "since", "until", "limit"}
	for s, want := range map[string]string{
		"kind":   "kinds",
		"authrs": "authors",
		"limt":   "limit",
		"until":  "until",
		"zzzzzz": "",
		"":       "", // every word is at least 3 edits away
	} {
		if got := Closest(s, known, 2); got != want {
			t.Errorf("Closest(%q) = %q, want %q", s, got, want)
		}
	}
	if got := Closest("ab", []string{"ax", "ay"}, 1); got != "ax" {
		t.Errorf("a tie: %q, want the first", got)
	}
}
