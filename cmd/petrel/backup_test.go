package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBackupCommand(t *testing.T) {
	evs := toolEvents()
	data := fillStore(t, evs)
	dest := filepath.Join(t.TempDir(), "backup")
	out, _, err := runTool(t, backupCmd, "", "--data", data, "--verify", dest)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "backup of "+data+" written to "+dest) || !strings.Contains(out, "verified: 40 events") {
		t.Fatalf("output %q", out)
	}
	// The copy is a store of its own, with the same events in the same order.
	if a, b := storedRaws(t, data), storedRaws(t, dest); !slices.Equal(a, b) || !sameSet(a, raws(evs)) {
		t.Fatalf("backup holds %d events, store %d", len(b), len(a))
	}
	// Writes to the store after the backup do not reach it.
	if _, _, err := runTool(t, deleteCmd, "", "--data", data, "-q", "--yes", "--filter", `{"kinds":[7]}`); err != nil {
		t.Fatal(err)
	}
	if n := len(storedRaws(t, dest)); n != 40 {
		t.Fatalf("backup holds %d events after a delete in the store", n)
	}

	bad := func(want string, args ...string) {
		t.Helper()
		_, _, err := runTool(t, backupCmd, "", args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: error %v, want %q", args, err, want)
		}
	}
	bad("already exists", "--data", data, dest)
	bad("accepts 1 arg", "--data", data)
	openStoreAt(t, data)
	bad("is petrel serve running?", "--data", data, filepath.Join(t.TempDir(), "b2"))
}
