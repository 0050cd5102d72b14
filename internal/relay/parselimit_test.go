package relay

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// TestParseLimitCoversBounds: every bound the parser can report trips the
// limit counter named for it, so a Bound added to nostr without a case in
// parseLimit fails here instead of going uncounted.
func TestParseLimitCoversBounds(t *testing.T) {
	want := map[nostr.Bound]string{
		nostr.BoundSubIDLen:     "max_subid_length",
		nostr.BoundFilters:      "max_filters",
		nostr.BoundFilterValues: "max_filter_values",
		nostr.BoundTags:         "max_tags",
		nostr.BoundTagElems:     "max_tags",
		nostr.BoundContentBytes: "max_content_bytes",
		nostr.BoundEventBytes:   "max_event_bytes",
		nostr.BoundFilterBytes:  "max_message_bytes",
		nostr.BoundMessageBytes: "max_message_bytes",
	}
	for _, b := range nostr.Bounds() {
		lim := parseLimit(b)
		if lim < 0 || lim >= numLimits {
			t.Errorf("%v: no limit counter (%d)", b, lim)
			continue
		}
		if w, ok := want[b]; !ok {
			t.Errorf("%v: counts as %q, and this test does not say what it should", b, limitNames[lim])
		} else if limitNames[lim] != w {
			t.Errorf("%v: counts as %q, want %q", b, limitNames[lim], w)
		}
	}
	if lim := parseLimit(nostr.BoundNone); lim != -1 {
		t.Errorf("BoundNone counts as %q", limitNames[lim])
	}
}
