package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

func TestDeleteCommand(t *testing.T) {
	evs := toolEvents()
	data := fillStore(t, evs)
	reactions := `{"authors":["` + evs[30].PubKey.Hex() + `"]}`
	count := func(want int) {
		t.Helper()
		if got := len(storedRaws(t, data)); got != want {
			t.Fatalf("store holds %d events, want %d", got, want)
		}
	}
	f := func(wantOut, wantErr string, args ...string) {
		t.Helper()
		out, _, err := runTool(t, deleteCmd, "", append([]string{"--data", data, "-q"}, args...)...)
		switch {
		case wantErr == "" && err != nil:
			t.Fatalf("%v: %v", args, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Fatalf("%v: error %v, want %q", args, err, wantErr)
		case !strings.Contains(out, wantOut):
			t.Fatalf("%v: output %q, want %q", args, out, wantOut)
		}
	}
	f("10 events match (dry run: nothing deleted)", "", "--filter", reactions, "--dry-run")
	count(40)
	// stdin is not a terminal: no confirmation, nothing deleted.
	f("", "10 events match; refusing to delete without confirmation", "--filter", reactions)
	count(40)
	f("deleted 3 of 3 matching events", "", "--filter", `{"kinds":[7],"limit":3}`, "--yes")
	count(37)
	f(`"deleted":7`, "", "--filter", reactions, "--yes", "--json", "--batch", "2")
	count(30)
	f("deleted 0 of 0", "", "--filter", reactions, "--yes")
	f("", "--filter is required")
	f("", "matches every event: add --all", "--filter", `{}`, "--yes")
	f("", "matches every event: add --all", "--filter", `[{"kinds":[1]},{}]`, "--yes")
	f("deleted 30 of 30", "", "--filter", `{}`, "--all", "--yes")
	count(0)
}

func TestDeleteEvents(t *testing.T) {
	evs := toolEvents()
	st := openStoreAt(t, fillStore(t, evs))
	ctx := context.Background()
	kinds1 := []nostr.Filter{{Kinds: []int{1}}}
	asked := -1
	res, err := deleteEvents(ctx, st, kinds1, deleteOptions{Confirm: func(n int) (bool, error) { asked = n; return false, nil }})
	if !errors.Is(err, errNotConfirmed) || asked != 30 || res.Deleted != 0 {
		t.Fatalf("refused confirmation: %v, asked %d, %+v", err, asked, res)
	}
	var progress [][2]int
	res, err = deleteEvents(ctx, st, kinds1, deleteOptions{Batch: 7, Progress: func(d, n int) { progress = append(progress, [2]int{d, n}) }})
	if err != nil || res.Matched != 30 || res.Deleted != 30 {
		t.Fatalf("delete: %v %+v", err, res)
	}
	if len(progress) != 5 || progress[4] != [2]int{30, 30} || progress[0] != [2]int{7, 30} {
		t.Fatalf("progress %v", progress)
	}
	if n, _ := st.Count(ctx, []nostr.Filter{{}}); n != 10 {
		t.Fatalf("%d events left", n)
	}
	// Removed, not tombstoned: the events can be saved again.
	res2, err := st.Save(ctx, evs[:1])
	if err != nil || res2[0].Outcome.String() != "stored" {
		t.Fatalf("save again: %v %+v", err, res2)
	}
}

// TestDeleteHolds: a held list is taken once, with its token, until it
// expires; a new listing replaces it.
func TestDeleteHolds(t *testing.T) {
	var h deleteHolds
	items := []store.Item{{CreatedAt: 1}, {CreatedAt: 2}}
	tok := h.put(items)
	if _, ok := h.take("not-" + tok); ok {
		t.Fatal("taken with another token")
	}
	if _, ok := h.take(""); ok {
		t.Fatal("taken without a token")
	}
	// Just before its expiry the list is there, once.
	h.expires = time.Now().Add(time.Second)
	if got, ok := h.take(tok); !ok || len(got) != 2 {
		t.Fatalf("take before expiry: %v %v", got, ok)
	}
	if _, ok := h.take(tok); ok {
		t.Fatal("taken twice")
	}
	// Past it, it is gone.
	tok = h.put(items)
	h.expires = time.Now().Add(-time.Millisecond)
	if _, ok := h.take(tok); ok {
		t.Fatal("taken after expiry")
	}
	// A new listing replaces the held one.
	old := h.put(items)
	tok = h.put(items[:1])
	if _, ok := h.take(old); ok {
		t.Fatal("the replaced list taken")
	}
	if got, ok := h.take(tok); !ok || len(got) != 1 {
		t.Fatalf("the new list: %v %v", got, ok)
	}
	if holdTTL != 10*time.Minute {
		t.Fatalf("holdTTL %v, want the 10 minutes the messages promise", holdTTL)
	}
}
