package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
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
