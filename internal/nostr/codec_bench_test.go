package nostr

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// benchEvents are the event shapes the codec benchmarks run on.
func benchEvents() []struct {
	name string
	raw  []byte
} {
	typical := typicalEvent()

	large := typicalEvent()
	large.Kind = KindFollows
	large.Content = ""
	large.Tags = nil
	for i := range 500 {
		pk := typical.PubKey
		pk[0], pk[1] = byte(i), byte(i>>8)
		large.Tags = append(large.Tags, Tag{"p", pk.Hex(), "wss://relay.example.com"})
	}
	large.ID = ComputeID(large)

	escaped := typicalEvent()
	escaped.Content = strings.Repeat("Line with \"quotes\", a tab\tand caf\u00e9 \\o/\n", 5)[:200]
	escaped.ID = ComputeID(escaped)

	out := []struct {
		name string
		raw  []byte
	}{
		{"typical", typical.Raw},
		{"large-tags", Serialize(large)},
		{"escaped-content", Serialize(escaped)},
	}
	return out
}

func BenchmarkParseEvent(b *testing.B) {
	for _, e := range benchEvents() {
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(e.raw)))
			for b.Loop() {
				if _, err := ParseEvent(e.raw, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseEventEncodingJSON is the encoding/json baseline for
// BenchmarkParseEvent: decoding into string fields and then into the
// Event's binary fields, without the validation ParseEvent does.
func BenchmarkParseEventEncodingJSON(b *testing.B) {
	for _, e := range benchEvents() {
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(e.raw)))
			for b.Loop() {
				var j jsonEvent
				if err := json.Unmarshal(e.raw, &j); err != nil {
					b.Fatal(err)
				}
				if _, ok := fromJSONEvent(&j); !ok {
					b.Fatal("bad event")
				}
			}
		})
	}
}

func BenchmarkComputeID(b *testing.B) {
	for _, e := range benchEvents() {
		ev, err := ParseEvent(e.raw, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ComputeID(ev)
			}
		})
	}
}

// BenchmarkParseAndID is the ingest cost before signature verification.
func BenchmarkParseAndID(b *testing.B) {
	for _, e := range benchEvents() {
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(e.raw)))
			for b.Loop() {
				ev, err := ParseEvent(e.raw, nil)
				if err != nil || !CheckID(ev) {
					b.Fatal("bad event", err)
				}
			}
		})
	}
}

func BenchmarkSerialize(b *testing.B) {
	for _, e := range benchEvents() {
		ev, _ := ParseEvent(e.raw, nil)
		buf := make([]byte, 0, 2*len(e.raw))
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendEvent(buf[:0], ev)
			}
		})
	}
}

func benchFilters() []struct {
	name string
	raw  []byte
} {
	authors := func(n int) string {
		var s strings.Builder
		for i := range n {
			if i > 0 {
				s.WriteByte(',')
			}
			pk := PubKey{byte(i), byte(i >> 8), 7}
			s.WriteString(`"` + pk.Hex() + `"`)
		}
		return s.String()
	}
	return []struct {
		name string
		raw  []byte
	}{
		{"kinds-limit", []byte(`{"kinds":[1,6,7],"limit":100,"since":1700000000}`)},
		{"tags", []byte(`{"kinds":[1],"#e":["` + hexID + `"],"#p":["` + hexPK + `"],"#t":["nostr","bitcoin"]}`)},
		{"authors=10", []byte(`{"authors":[` + authors(10) + `],"kinds":[1,6],"limit":500}`)},
		{"authors=500", []byte(`{"authors":[` + authors(500) + `],"kinds":[1,6],"limit":500}`)},
	}
}

func BenchmarkParseFilter(b *testing.B) {
	for _, f := range benchFilters() {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.raw)))
			for b.Loop() {
				if _, err := ParseFilter(f.raw, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseClientMessage(b *testing.B) {
	msgs := []struct {
		name string
		raw  []byte
	}{
		{"EVENT", append(append([]byte(`["EVENT",`), typicalEvent().Raw...), ']')},
		{"CLOSE", []byte(`["CLOSE","sub-1"]`)},
	}
	for _, f := range benchFilters() {
		msgs = append(msgs, struct {
			name string
			raw  []byte
		}{reqBenchName(f.name), []byte(`["REQ","sub-1",` + string(f.raw) + `]`)})
	}
	for _, m := range msgs {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(m.raw)))
			for b.Loop() {
				if _, err := ParseClientMessage(m.raw, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reqBenchName names the REQ sub-benchmarks: REQ-500-authors for the
// authors=500 filter.
func reqBenchName(filter string) string {
	if n, ok := strings.CutPrefix(filter, "authors="); ok {
		return "REQ-" + n + "-authors"
	}
	return "REQ-" + filter
}

func BenchmarkAppendEventFrame(b *testing.B) {
	for _, e := range benchEvents() {
		buf := make([]byte, 0, len(e.raw)+64)
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(e.raw)))
			for b.Loop() {
				buf = AppendEventFrame(buf[:0], "sub-1", e.raw)
			}
		})
	}
}

func BenchmarkAppendOK(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 256)
	var id ID
	for b.Loop() {
		buf = AppendOK(buf[:0], id, false, "invalid: bad signature")
	}
}

func BenchmarkParseRelayMessage(b *testing.B) {
	var id ID
	msgs := []struct {
		name string
		raw  []byte
	}{
		{"EOSE", AppendEOSE(nil, "sub-1")},
		{"OK", AppendOK(nil, id, true, "")},
		{"COUNT", AppendCount(nil, "sub-1", 12345, false, nil)},
	}
	for _, e := range benchEvents() {
		msgs = append(msgs, struct {
			name string
			raw  []byte
		}{"EVENT-" + e.name, AppendEventFrame(nil, "sub-"+strconv.Itoa(len(msgs)), e.raw)})
	}
	for _, m := range msgs {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(m.raw)))
			for b.Loop() {
				if _, err := ParseRelayMessage(m.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFilterMatches: the exact check the fan-out runs for every
// candidate subscription, on prepared filters (sorted lists, as the relay
// keeps them), for the typical event. The authors filters get the event's
// author added last, so they match after a binary search (or a scan of 11).
func BenchmarkFilterMatches(b *testing.B) {
	ev := typicalEvent()
	for _, f := range benchFilters() {
		flt, err := ParseFilter(f.raw, nil)
		if err != nil {
			b.Fatal(err)
		}
		if flt.HasAuthors() {
			flt.Authors = append(flt.Authors, ev.PubKey)
		}
		flt.Prepare()
		want := flt.Matches(ev)
		name := f.name + "/miss"
		if want {
			name = f.name + "/match"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if flt.Matches(ev) != want {
					b.Fatal("result changed")
				}
			}
		})
	}
}
