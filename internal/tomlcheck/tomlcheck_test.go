package tomlcheck

import (
	"strings"
	"testing"
	"time"
)

type inner struct {
	Wait  time.Duration  `toml:"wait"`
	Catch *time.Duration `toml:"catch"`
	Count int            `toml:"count"`
	Names []string       `toml:"names"`
}

type sample struct {
	Name    string           `toml:"name"`
	Timeout time.Duration    `toml:"timeout"`
	Section inner            `toml:"section"`
	Groups  map[string]inner `toml:"groups"`
	Rules   []inner          `toml:"rules"`
	Limit   int64            `toml:"limit"`
	Loose   map[string]any   `toml:"loose"`
}

func decode(t *testing.T, text string) (sample, error) {
	t.Helper()
	var s sample
	err := Decode(text, &s)
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("%q: the error is not one line: %q", text, err)
	}
	return s, err
}

func TestDecodeAccepts(t *testing.T) {
	s, err := decode(t, `name = "x"
timeout = "1m"
limit = 5
[section]
wait = "250ms"
catch = "2s"
count = 3
[groups.a]
wait = "1s"
[[rules]]
catch = "3s"
[loose]
anything = 5
`)
	if err != nil {
		t.Fatal(err)
	}
	if s.Timeout != time.Minute || s.Section.Wait != 250*time.Millisecond || *s.Section.Catch != 2*time.Second ||
		s.Groups["a"].Wait != time.Second || *s.Rules[0].Catch != 3*time.Second || s.Loose["anything"] != int64(5) {
		t.Fatalf("decoded %+v", s)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for text, want := range map[string]string{
		// Durations as bare numbers, wherever they are.
		"timeout = 30":                                    "timeout = 30: a duration is a string with its unit",
		"[section]\nwait = 250":                           "section.wait = 250: a duration is a string",
		"[section]\ncatch = 2":                            "section.catch = 2: a duration is a string",
		"[groups.a]\nwait = 1":                            "groups.a.wait = 1: a duration is a string",
		"[[rules]]\ncatch = 3":                            "rules.catch = 3: a duration is a string",
		"timeout = 1.5":                                   "line 1: timeout: a duration is a string",
		"timeout = \"soon\"":                              "soon",
		"[section]\nwait = 1\ncatch = 2":                  "section.wait = 1: a duration is a string with its unit, like \"500ms\", \"10s\" or \"5m\" (a bare number would be nanoseconds); section.catch = 2: a duration",
		"[[rules]]\ncatch = \"1s\"\n[[rules]]\ncatch = 4": "rules.catch = 4: a duration",
		// Wrong types, in words.
		"limit = \"abc\"":          "line 1: limit: want a whole number, not a string",
		"name = 5":                 "line 1: name: want a string, not a whole number",
		"[section]\ncount = true":  "line 2: section.count: want a whole number, not true or false",
		"[section]\nnames = \"a\"": "line 2: section.names: want an array, not a string",
		// Unknown keys, with what was probably meant.
		"nmae = \"x\"":               "unknown keys: nmae (did you mean name?)",
		"[section]\nwiat = \"1s\"":   "unknown keys: section.wiat (did you mean section.wait?)",
		"[sectoin]\nwait = \"1s\"":   "unknown keys: sectoin (did you mean section?)",
		"[groups.a]\nwiat = \"1s\"":  "unknown keys: groups.a.wiat (did you mean groups.a.wait?)",
		"count = 3":                  "unknown keys: count (did you mean section.count?)",
		"[groups.a]\nlimit = 3":      "unknown keys: groups.a.limit",
		"zzzzzzzz = 1\nqqqqqqqq = 2": "unknown keys: zzzzzzzz, qqqqqqqq",
	} {
		_, err := decode(t, text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v\n want %q", text, err, want)
		}
	}
	// Zero and negative numbers mean the same in any unit (off, never).
	s, err := decode(t, "timeout = 0\n[section]\nwait = -1\ncatch = 0")
	if err != nil || s.Timeout != 0 || s.Section.Wait >= 0 || *s.Section.Catch != 0 {
		t.Errorf("zero and negative durations: %+v, %v", s, err)
	}
	// Nothing near enough, and no field of that name in another table:
	// no guess (a root field is not offered for a key inside a table).
	for _, text := range []string{"[groups.a]\nlimit = 3", "zzzzzzzz = 1"} {
		if _, err := decode(t, text); err == nil || strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: %v, want no suggestion", text, err)
		}
	}
	// A key in an unknown table is not listed beside it.
	if _, err := decode(t, "[sectoin]\nwait = \"1s\"\ncount = 1"); err == nil || strings.Contains(err.Error(), "sectoin.wait") {
		t.Errorf("keys of an unknown table: %v", err)
	}
}
