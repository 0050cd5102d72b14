package main

import (
	"bytes"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestNoReflectMethodLookup: nothing reachable in petrel looks methods up
// by name through reflection (reflect.Value.MethodByName or Method with
// a computed argument, as text/template's execution does). Once such a
// call is reachable the linker keeps every exported method of every type
// in the binary: 5 MB more code that every command, client commands
// included, maps at start (docs/BENCHMARKS.md, issue 15). The linker
// marks such functions <ReflectMethod> in its -dumpdep output.
func TestNoReflectMethodLookup(t *testing.T) {
	if testing.Short() {
		t.Skip("links the petrel binary")
	}
	cmd := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", filepath.Join(t.TempDir(), "petrel"), ".")
	var deps bytes.Buffer
	cmd.Stderr = &deps
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v\n%.2000s", err, deps.String())
	}
	if !strings.Contains(deps.String(), "main.main -> ") {
		t.Fatalf("the linker printed no dependency graph (%d bytes): -dumpdep changed?", deps.Len())
	}
	found := map[string]bool{}
	for line := range strings.Lines(deps.String()) {
		from, _, ok := strings.Cut(line, " -> ")
		if ok && strings.HasSuffix(from, " <ReflectMethod>") {
			found[strings.TrimSuffix(from, " <ReflectMethod>")] = true
		}
	}
	if len(found) > 0 {
		t.Fatalf("reachable functions look methods up by name, so the linker keeps every exported method: %v", slices.Sorted(maps.Keys(found)))
	}
}
