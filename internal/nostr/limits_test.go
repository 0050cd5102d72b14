package nostr

import (
	"reflect"
	"strings"
	"testing"
)

// TestLimitBounds: each Limits bound accepts an input at the limit and
// refuses one just past it with its own Bound, through ParseClientMessage
// (the relay's path) and through the parse function of the part it bounds.
// Every Bound of a Limits field has a row; the size ceilings are tested in
// limits_linux_test.go.
func TestLimitBounds(t *testing.T) {
	tags := func(n int) string {
		return `[` + strings.TrimSuffix(strings.Repeat(`["t","x"],`, n), ",") + `]`
	}
	tagOf := func(n int) string {
		return `[[` + strings.TrimSuffix(strings.Repeat(`"x",`, n), ",") + `]]`
	}
	event := func(fs ...field) string { return `["EVENT",` + evWith(fs...) + `]` }
	req := func(subID string, filters ...string) string {
		return `["REQ","` + subID + `",` + strings.Join(filters, ",") + `]`
	}
	type row struct {
		lim       Limits
		at, past  string                      // client messages
		part      func(string, *Limits) error // the part's own parser, or nil
		partInput func(message string) string // the part inside a message
	}
	parseEv := func(s string, l *Limits) error { _, err := ParseEvent([]byte(s), l); return err }
	parseFl := func(s string, l *Limits) error { _, err := ParseFilter([]byte(s), l); return err }
	evPart := func(m string) string { return strings.TrimSuffix(strings.TrimPrefix(m, `["EVENT",`), `]`) }
	flPart := func(m string) string { return m[strings.Index(m, "{") : strings.LastIndex(m, "}")+1] }
	rows := map[Bound]row{
		BoundSubIDLen: {lim: Limits{MaxSubIDLen: 8},
			at: req("12345678", "{}"), past: req("123456789", "{}")},
		BoundFilters: {lim: Limits{MaxFilters: 2},
			at: req("s", "{}", "{}"), past: req("s", "{}", "{}", "{}")},
		BoundFilterValues: {lim: Limits{MaxFilterValues: 3},
			at: req("s", `{"kinds":[1,2,3]}`), past: req("s", `{"kinds":[1,2,3,4]}`),
			part: parseFl, partInput: flPart},
		BoundTags: {lim: Limits{MaxTags: 3},
			at: event(field{"tags", tags(3)}), past: event(field{"tags", tags(4)}),
			part: parseEv, partInput: evPart},
		BoundTagElems: {lim: Limits{MaxTagElems: 4},
			at: event(field{"tags", tagOf(4)}), past: event(field{"tags", tagOf(5)}),
			part: parseEv, partInput: evPart},
		BoundContentBytes: {lim: Limits{MaxContentBytes: 5},
			// Counted after unescaping: \u00e9 is two bytes.
			at: event(field{"content", `"abc\u00e9"`}), past: event(field{"content", `"abcd\u00e9"`}),
			part: parseEv, partInput: evPart},
	}
	check := func(b Bound, what, in string, err error, wantBound Bound) {
		t.Helper()
		switch {
		case wantBound == BoundNone && err != nil:
			t.Errorf("%v: %s at the limit refused: %v (%.80s)", b, what, err, in)
		case wantBound != BoundNone && err == nil:
			t.Errorf("%v: %s past the limit accepted (%.80s)", b, what, in)
		case wantBound != BoundNone:
			if pe := parseErr(t, err); pe.Bound != wantBound {
				t.Errorf("%v: %s past the limit refused with Bound %v: %v", b, what, pe.Bound, err)
			}
		}
	}
	for _, b := range Bounds() {
		r, ok := rows[b]
		if !ok {
			if strings.HasPrefix(b.String(), "Max") {
				t.Errorf("%v: no row for this Limits bound", b)
			}
			continue
		}
		_, err := ParseClientMessage([]byte(r.at), &r.lim)
		check(b, "message", r.at, err, BoundNone)
		_, err = ParseClientMessage([]byte(r.past), &r.lim)
		check(b, "message", r.past, err, b)
		// Without the limit, the message past it is fine.
		_, err = ParseClientMessage([]byte(r.past), nil)
		check(b, "message without limits", r.past, err, BoundNone)
		if r.part != nil {
			at, past := r.partInput(r.at), r.partInput(r.past)
			check(b, "part", at, r.part(at, &r.lim), BoundNone)
			check(b, "part", past, r.part(past, &r.lim), b)
		}
	}
}

// TestBounds: Bounds lists every bound once, each with its own name, and
// there is one Bound for each Limits field, named after it.
func TestBounds(t *testing.T) {
	names := map[string]Bound{}
	for _, b := range Bounds() {
		n := b.String()
		if b == BoundNone || strings.HasPrefix(n, "bound(") {
			t.Errorf("Bounds() holds %d (%q)", b, n)
		}
		if prev, dup := names[n]; dup {
			t.Errorf("%d and %d are both named %q", prev, b, n)
		}
		names[n] = b
	}
	lt := reflect.TypeOf(Limits{})
	fields := 0
	for i := range lt.NumField() {
		if _, ok := names[lt.Field(i).Name]; !ok {
			t.Errorf("Limits.%s has no Bound", lt.Field(i).Name)
		}
		fields++
	}
	limitBounds := 0
	for n := range names {
		if strings.HasPrefix(n, "Max") {
			limitBounds++
		}
	}
	if limitBounds != fields {
		t.Errorf("%d Bounds name a Limits field, Limits has %d fields", limitBounds, fields)
	}
	if s := BoundNone.String(); s != "none" {
		t.Errorf("BoundNone is %q", s)
	}
	if s := Bound(200).String(); s != "bound(200)" {
		t.Errorf("Bound(200) is %q", s)
	}
}
