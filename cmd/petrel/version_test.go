package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestVersionFlag: petrel --version (and -v) print what petrel version
// prints.
func TestVersionFlag(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		root := newRoot(append([]string{"petrel"}, args...))
		var out bytes.Buffer
		root.SetOut(&out)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	want := run("version")
	if !strings.HasPrefix(want, "petrel ") || !strings.Contains(want, "verifier ") {
		t.Fatalf("petrel version: %q", want)
	}
	for _, flag := range []string{"--version", "-v"} {
		if got := run(flag); got != want {
			t.Fatalf("petrel %s: %q, want %q", flag, got, want)
		}
	}
}
