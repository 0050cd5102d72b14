package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestCompactCommand(t *testing.T) {
	evs := toolEvents()
	// The store keeps an event that expired, hidden, until a purge.
	expired := relaytest.NewKey("tool-expiring").Event(1, "bye", nostr.Tags{{"expiration", "1000"}}, fixtureBase)
	data := fillStore(t, append(slices.Clone(evs), expired))
	before := storedRaws(t, data)
	if !sameSet(before, raws(evs)) {
		t.Fatalf("store holds %d events before", len(before))
	}
	// Remove some, so the compaction has something to drop.
	if _, _, err := runTool(t, deleteCmd, "", "--data", data, "-q", "--yes", "--filter", `{"kinds":[7]}`); err != nil {
		t.Fatal(err)
	}
	out, _, err := runTool(t, compactCmd, "", "--data", data, "--purge-expired", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res compactResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Purged != 1 || res.SizeBefore <= 0 || res.SizeAfter <= 0 {
		t.Fatalf("result %+v", res)
	}
	after := storedRaws(t, data)
	if !sameSet(after, raws(evs[:30])) {
		t.Fatalf("store holds %d events after compaction, not the 30 notes", len(after))
	}

	// A second run has nothing to purge; the summary names both sizes.
	out, _, err = runTool(t, compactCmd, "", "--data", data, "-q", "--purge-expired")
	if err != nil || !strings.HasPrefix(out, "compacted in ") || !strings.Contains(out, " -> ") || strings.Contains(out, "purged") {
		t.Fatalf("%v: %q", err, out)
	}
	if _, _, err := runTool(t, compactCmd, "", "--data", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Fatalf("missing store: %v", err)
	}
	openStoreAt(t, data)
	if _, _, err := runTool(t, compactCmd, "", "--data", data); err == nil || !strings.Contains(err.Error(), "is petrel serve running?") {
		t.Fatalf("held store: %v", err)
	}
}

// TestCompactRebuildSearch: a profile replaced after it was indexed leaves
// its postings behind; compact --rebuild-search rebuilds the index, and
// search still finds exactly the current profile. With search disabled
// the flag is refused.
func TestCompactRebuildSearch(t *testing.T) {
	k := relaytest.NewKey("tool-profile")
	old := k.Event(0, `{"name":"ann","about":"quince grower"}`, nil, fixtureBase)
	cur := k.Event(0, `{"name":"ann","about":"plum grower"}`, nil, fixtureBase+1)
	data := fillStore(t, []*nostr.Event{old})
	st := openStoreAt(t, data)
	if _, err := st.Save(context.Background(), []*nostr.Event{cur}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, _, err := runTool(t, compactCmd, "", "--data", data, "--rebuild-search", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res compactResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.SizeBefore <= 0 || res.SizeAfter <= 0 {
		t.Fatalf("%v: %s", err, out)
	}
	got, _, err := runTool(t, scanCmd, "", "--data", data, "--ids", "--filter", `{"search":"grower"}`)
	if err != nil || strings.TrimSpace(got) != cur.ID.Hex() {
		t.Fatalf("search after the rebuild: %v %q, want %s", err, got, cur.ID.Hex())
	}
	t.Setenv("PETREL_STORE_DISABLE_SEARCH", "true")
	if _, _, err := runTool(t, compactCmd, "", "--data", data, "--rebuild-search"); err == nil || !strings.Contains(err.Error(), "search is disabled") {
		t.Fatalf("rebuild with search disabled: %v", err)
	}
}
