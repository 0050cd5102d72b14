package cli

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// TestStreamSinkBounded: a --stream sink drops a duplicate arriving
// within its window (another relay's copy) and remembers at most twice
// the window, so a long stream's memory stays bounded; a sink that is not
// streaming remembers every id.
func TestStreamSinkBounded(t *testing.T) {
	ev := func(i int) *nostr.Event {
		var id nostr.ID
		copy(id[:], fmt.Sprintf("%032d", i))
		return &nostr.Event{ID: id, Raw: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	var out strings.Builder
	s := newEventSink(&out, io.Discard, true, false)
	s.window = 4
	put := func(i int) bool {
		t.Helper()
		e := ev(i)
		fresh, err := s.put(e, e.Raw, "test")
		if err != nil {
			t.Fatal(err)
		}
		return fresh
	}
	for i := range 100 {
		if !put(i) || put(i) { // the second copy: dropped
			t.Fatalf("event %d: not written once", i)
		}
		if n := len(s.seen) + len(s.older); n > 2*s.window {
			t.Fatalf("after %d events the sink remembers %d ids, bound %d", i+1, n, 2*s.window)
		}
		if i >= 3 && put(i-3) { // the last 4 (the window): still duplicates
			t.Fatalf("event %d, 3 events later: written again", i-3)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 100 {
		t.Fatalf("%d lines written, want 100", n)
	}
	if s.flush != true || newEventSink(io.Discard, io.Discard, false, false).window != 0 {
		t.Fatal("only a stream's sink forgets")
	}
}
