package pebble

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpenForeignDir: a store is not created in a directory of other
// files (a mistyped data directory), which is left as it was; an empty
// one, a file system's lost+found and the leftovers of a creation that
// did not finish are fine, and so is an existing store with a file of
// the operator's beside it.
func TestOpenForeignDir(t *testing.T) {
	write := func(dir string, names ...string) {
		t.Helper()
		for _, n := range names {
			if strings.HasSuffix(n, "/") {
				if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(dir string) []string {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	open := func(dir string) (*Store, error) {
		return Open(Options{Path: dir, Logger: quiet, PurgeInterval: -1})
	}

	home := t.TempDir()
	write(home, ".profile", "notes.txt", "000001.log.bak")
	before := list(home)
	s, err := open(home)
	if err == nil {
		s.Close()
		t.Fatal("a store was created in a directory of other files")
	}
	if !errors.Is(err, ErrForeignDir) || !strings.Contains(err.Error(), `(".profile" among them)`) {
		t.Fatalf("Open of a directory of other files: %v, want ErrForeignDir naming .profile", err)
	}
	if after := list(home); !slices.Equal(before, after) {
		t.Fatalf("the refused Open changed the directory: %v, was %v", after, before)
	}
	// NoCreate still says there is no store.
	if _, err := Open(Options{Path: home, Logger: quiet, NoCreate: true}); !errors.Is(err, ErrNoStore) {
		t.Fatalf("NoCreate: %v, want ErrNoStore", err)
	}

	for _, c := range []struct {
		name  string
		files []string
	}{
		{"empty", nil},
		{"mount", []string{"lost+found/"}},
		{"unfinished", []string{"LOCK", "MANIFEST-000001", "marker.format-version.000001.024", "temporary.000003.dbtmp", "wal-spare-1"}},
	} {
		dir := t.TempDir()
		write(dir, c.files...)
		s, err := open(dir)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s.Close()
	}

	// A store's tables or logs without its manifest (a copy that did not
	// finish) are not deleted under a new store; an empty log is not
	// data.
	for _, c := range []struct {
		files []string
		data  int // how many hold data
	}{
		{[]string{"LOCK", "000040.sst", "000041.sst", "000042.log"}, 3},
		{[]string{"000007.log"}, 1},
		{[]string{"000009.blob", "marker.format-version.000001.024"}, 1},
	} {
		files := c.files
		dir := t.TempDir()
		write(dir, files...)
		before := list(dir)
		s, err := open(dir)
		if err == nil {
			s.Close()
			t.Fatalf("%v: a new store was created over a store's files", files)
		}
		if !errors.Is(err, ErrPartialStore) || !strings.Contains(err.Error(), fmt.Sprintf("holds %d table or log files", c.data)) {
			t.Fatalf("%v: %v, want ErrPartialStore counting them", files, err)
		}
		if after := list(dir); !slices.Equal(before, after) {
			t.Fatalf("the refused Open changed the directory: %v, was %v", after, before)
		}
		// Opened to read, or without creating: the same, not "no store".
		for _, o := range []Options{{Path: dir, Logger: quiet, ReadOnly: true}, {Path: dir, Logger: quiet, NoCreate: true}} {
			if s, err := Open(o); err == nil {
				s.Close()
				t.Fatalf("%v: opened %+v", files, o)
			} else if !errors.Is(err, ErrPartialStore) || errors.Is(err, ErrNoStore) {
				t.Fatalf("%v, read-only %v: %v, want ErrPartialStore", files, o.ReadOnly, err)
			}
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "000002.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := open(dir); err != nil {
		t.Fatalf("an empty log: %v", err)
	} else {
		s.Close()
	}

	// An existing store: a file beside it does not stop it opening.
	dir = t.TempDir()
	s, err = open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	write(dir, "README")
	if s, err = open(dir); err != nil {
		t.Fatalf("a store with a README beside it: %v", err)
	}
	s.Close()
}

func TestOwnFile(t *testing.T) {
	for name, want := range map[string]bool{
		"000123.sst": true, "9.log": true, "000007.blob": true,
		"MANIFEST-000001": true, "OPTIONS-000003": true, "CURRENT": true, "LOCK": true,
		"marker.manifest.000001.MANIFEST-000001": true, "temporary.000003.dbtmp": true,
		"wal-spare-2": true, "lost+found": true,
		".log": false, "abc.sst": false, "000001.sst.bak": false, "000001.txt": false,
		"notes": false, "petrel.toml": false, "": false,
	} {
		if got := ownFile(name); got != want {
			t.Errorf("ownFile(%q) = %v, want %v", name, got, want)
		}
	}
}
