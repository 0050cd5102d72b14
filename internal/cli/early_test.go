package cli

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestStoreArg(t *testing.T) {
	for _, c := range []struct {
		args  []string
		dir   string
		given bool
	}{
		{nil, "", false},
		{[]string{"-k", "1", "wss://relay"}, "", false},
		{[]string{"--store", "/d"}, "/d", true},
		{[]string{"-k", "1", "--store=/d"}, "/d", true},
		{[]string{"--store"}, "", true},
		{[]string{"--store=/a", "--store", "/b"}, "/b", true}, // the last one wins, as in pflag
		{[]string{"--", "--store", "/d"}, "", false},
		{[]string{"--stream", "--store-x"}, "", false},
	} {
		dir, given := storeArg(c.args)
		if dir != c.dir || given != c.given {
			t.Errorf("storeArg(%q) = %q, %v; want %q, %v", c.args, dir, given, c.dir, c.given)
		}
	}
}

// Early takes client commands, and --store runs only where a relay
// answers on the store's control socket.
func TestEarly(t *testing.T) {
	served := t.TempDir()
	ln, err := net.Listen("unix", ControlSocketPath(served))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// A socket a killed relay left behind: nothing accepts on it.
	stale := staleSocketDir(t)
	// A file of the socket's name that is not a socket.
	notSocket := t.TempDir()
	if err := os.WriteFile(filepath.Join(notSocket, ControlSocketName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"petrel"}, false},
		{[]string{"petrel", "--version"}, true},
		{[]string{"petrel", "-v"}, true},
		{[]string{"petrel", "--version", "serve"}, false},
		{[]string{"petrel", "--help"}, false},
		{[]string{"petrel", "serve"}, false},
		{[]string{"petrel", "import", "x.jsonl"}, false},
		{[]string{"petrel", "version"}, true},
		{[]string{"petrel", "key", "generate"}, true},
		{[]string{"petrel", "req", "-k", "1", "ws://127.0.0.1:7447"}, true},
		{[]string{"petrel", "req", "--store", served, "-k", "1"}, true},
		{[]string{"petrel", "count", "--store=" + served}, true},
		{[]string{"petrel", "req", "--store", stale}, false},
		{[]string{"petrel", "req", "--store", notSocket}, false},
		{[]string{"petrel", "req", "--store", t.TempDir()}, false},
		{[]string{"petrel", "req", "--store"}, false},
	} {
		if got := Early(c.args); got != c.want {
			t.Errorf("Early(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// Without cmd/petrel (as while package early runs a command), a --store
// run that must open the store itself says so instead of failing on a nil
// reader.
func TestStoreWithoutLocalReader(t *testing.T) {
	if LocalStore != nil {
		t.Skip("LocalStore is set")
	}
	s := &storeFlags{dir: t.TempDir()}
	if _, err := s.count(t.Context(), nil); !errors.Is(err, errNoLocalStore) {
		t.Fatalf("count: %v", err)
	}
	sink := newEventSink(io.Discard, io.Discard, false, false)
	if err := s.query(t.Context(), nil, sink); !errors.Is(err, errNoLocalStore) {
		t.Fatalf("query: %v", err)
	}
}
