package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
// marks such functions <ReflectMethod> in its -dumpdep output, which
// petrelBin's build prints.
func TestNoReflectMethodLookup(t *testing.T) {
	petrelBin(t)
	if !linkerGraph {
		t.Fatal("the linker printed no dependency graph: -dumpdep changed?")
	}
	if len(reflectMethodFuncs) > 0 {
		t.Fatalf("reachable functions look methods up by name, so the linker keeps every exported method: %v", reflectMethodFuncs)
	}
}

// The Dockerfile stamps the version with -ldflags -X: the variable it names
// must be the one petrel version prints (a package move once left it
// naming main.version, which no longer existed, and the linker ignores an
// -X for a missing variable).
func TestDockerfileVersionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-X ([^ "=]+)=\$\{VERSION\}`).FindSubmatch(docker)
	if m == nil {
		t.Fatal("the Dockerfile's go build sets no -X ...=${VERSION}")
	}
	bin := filepath.Join(t.TempDir(), "petrel")
	build := exec.Command("go", "build", "-ldflags=-X "+string(m[1])+"=v0.0.0-stamp", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || !strings.HasPrefix(string(out), "petrel v0.0.0-stamp (") {
			t.Errorf("petrel %v with %s stamped: %q, %v", args, m[1], out, err)
		}
	}
}
