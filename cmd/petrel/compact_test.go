package main

import (
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
