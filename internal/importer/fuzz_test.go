package importer

import (
	"bytes"
	"context"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func seeds(f *testing.F) {
	ev := string(relaytest.NewKey("import-fuzz").Note("hi").Raw)
	for _, s := range []string{
		"", "\n", "\r\n", ev, ev + "\n" + ev, `["EVENT",` + ev + `]`, `["EVENT","s",` + ev + `]`,
		`["EVENT","s\"",` + ev + `]`, `["EOSE","s"]`, `[`, `["`, `["\`, `["EVENT",`, `["EVENT" , "`,
		`{"id":`, "not json\n\n" + ev, "\x1f\x8b", `["REQ","s",{}]`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzParseLine: any line is an event (that re-parses to itself), a
// skipped message, or an error; never a panic.
func FuzzParseLine(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		secondElemIsString(line)
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return
		}
		ev, isEvent, err := parseLine(line)
		if err != nil {
			if ev != nil || isEvent {
				t.Fatalf("error %v with an event", err)
			}
			return
		}
		if !isEvent {
			return
		}
		again, err := nostr.ParseEvent(ev.Raw, nil)
		if err != nil || again.ID != ev.ID || !bytes.Equal(again.Raw, ev.Raw) {
			t.Fatalf("event %s does not re-parse to itself: %v", ev.Raw, err)
		}
	})
}

// FuzzRunLines: the line reader accounts for every line and byte of any
// input, whatever the line lengths against a small MaxLine.
func FuzzRunLines(f *testing.F) {
	seeds(f)
	f.Add(bytes.Repeat([]byte("x"), 100))
	f.Add(append(bytes.Repeat([]byte("y"), 70), '\n', 'z'))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Run(context.Background(), storetest.NewModel(), bytes.NewReader(data),
			Options{NoVerify: true, MaxLine: 64, Workers: 2, Batch: 2, MaxErrors: 3})
		if err != nil {
			t.Fatal(err)
		}
		lines := int64(bytes.Count(data, []byte("\n")))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			lines++
		}
		c := res.Counts
		if c.Lines != lines || res.Bytes != int64(len(data)) {
			t.Fatalf("%d lines and %d bytes read, want %d and %d", c.Lines, res.Bytes, lines, len(data))
		}
		if c.Blank+c.Messages+c.Events+c.Invalid != c.Lines {
			t.Fatalf("lines do not add up: %+v", c)
		}
		skipped := c.Ephemeral + c.Expired + c.VanishElsewhere + c.BadID + c.BadSig
		if c.Stored+c.Duplicate+c.Superseded+c.Deleted+c.Failed+skipped != c.Events {
			t.Fatalf("events do not add up: %+v", c)
		}
		long := int64(0)
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 64 {
				long++
			}
		}
		if c.Invalid < long {
			t.Fatalf("%d lines over MaxLine, %d invalid", long, c.Invalid)
		}
		if len(res.Errors) > 3 {
			t.Fatalf("%d errors listed", len(res.Errors))
		}
	})
}
