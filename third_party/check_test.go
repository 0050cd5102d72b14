package thirdparty

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (slash path → content) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const fence = "```"

// The release of the checks below, and a PATCHES.md for a fork of it.
var (
	testRelease = map[string]string{
		"a.go":          "one\ntwo\nthree\nfour\nfive\n",
		"b.go":          "x\ny\n",
		"a_test.go":     "upstream test\n",
		"tools/tool.go": "tool\n",
		"end.go":        "no newline",
	}
	testPatches = "# fork\n\nWe leave out:\n\n" + fence + "left-out\n*_test.go\ntools/\n" + fence + "\n\n" +
		"The first change, tested by `own_test.go`:\n\n" + fence + "diff\n" +
		"--- a/a.go\t2026-01-01 00:00:00.000000000 +0000\n+++ b/a.go\t2026-01-01 00:00:00.000000000 +0000\n" +
		"@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n" + fence + "\n\n" +
		"The second, over the first, and a new file:\n\n" + fence + "diff\n" +
		"--- a/a.go\n+++ b/a.go\n@@ -2,2 +2,3 @@\n TWO\n+two and a half\n three\n" +
		"--- /dev/null\n+++ b/new.go\n@@ -0,0 +1,2 @@\n+package x\n+\n" +
		"--- a/end.go\n+++ b/end.go\n@@ -1 +1 @@\n-no newline\n\\ No newline at end of file\n+a newline\n" + fence + "\n"
	testFork = map[string]string{
		"a.go":         "one\nTWO\ntwo and a half\nthree\nfour\nfive\n",
		"b.go":         "x\ny\n",
		"new.go":       "package x\n\n",
		"end.go":       "a newline\n",
		"own_test.go":  "ours\n",
		"PATCHES.md":   testPatches,
		"nested/c.txt": "",
	}
)

// TestCheckFork: the check passes a fork that is its release as PATCHES.md
// says, and names each way a fork or its PATCHES.md can drift apart.
func TestCheckFork(t *testing.T) {
	release := map[string]string{}
	for k, v := range testRelease {
		release[k] = v
	}
	release["nested/c.txt"] = ""
	relDir := writeTree(t, release)

	// f checks a fork built from testFork with the given changes (a nil
	// value deletes the file) and wants problems mentioning each of want,
	// or none.
	f := func(name string, change map[string]*string, want ...string) {
		t.Helper()
		fork := map[string]string{}
		for k, v := range testFork {
			fork[k] = v
		}
		for k, v := range change {
			if v == nil {
				delete(fork, k)
			} else {
				fork[k] = *v
			}
		}
		problems := checkFork(relDir, writeTree(t, fork))
		var msgs []string
		for _, p := range problems {
			if !errors.Is(p, errUndocumented) {
				t.Errorf("%s: %v is not an errUndocumented", name, p)
			}
			msgs = append(msgs, p.Error())
		}
		all := strings.Join(msgs, "\n")
		if len(want) == 0 && len(problems) > 0 {
			t.Errorf("%s: unexpected problems:\n%s", name, all)
		}
		if len(want) > 0 && len(problems) == 0 {
			t.Errorf("%s: no problem found, want %q", name, want)
		}
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: no problem mentions %q; got:\n%s", name, w, all)
			}
		}
	}
	s := func(v string) *string { return &v }
	patches := func(from, to string) map[string]*string {
		return map[string]*string{"PATCHES.md": s(strings.Replace(testPatches, from, to, 1))}
	}

	f("as documented", nil)
	f("an undocumented change", map[string]*string{"b.go": s("x\nY\n")}, "b.go: the fork differs", "line 2")
	f("a documented change no longer in the fork", map[string]*string{"a.go": s("one\ntwo\nthree\nfour\nfive\n")}, "a.go: the fork differs")
	f("a created file missing", map[string]*string{"new.go": nil}, "new.go: a diff in PATCHES.md creates it")
	f("a release file missing", map[string]*string{"b.go": nil}, "b.go: in the release but not in the fork")
	f("an undocumented file", map[string]*string{"extra.go": s("package x\n")}, "extra.go: in the fork only")
	f("an unnamed test of ours", map[string]*string{"more_test.go": s("x\n")}, "more_test.go: a test of the fork's")
	f("a named test missing", map[string]*string{"own_test.go": nil}, "names the test own_test.go")
	f("a left-out file kept", map[string]*string{"tools/tool.go": s("tool\n")}, "tools/tool.go: in the fork only")
	f("a stale left-out pattern", patches("tools/\n", "tools/\nautobahn/\n"), `"autobahn/" matches no file`)
	f("a diff whose context is wrong", patches(" one\n-two", " uno\n-two"), "diff block 1, a.go", `the diff expects "uno\n"`)
	f("a diff at the wrong line", patches("@@ -2,2 +2,3 @@", "@@ -3,2 +3,3 @@"), "diff block 2, a.go")
	f("a hunk whose header miscounts", patches("@@ -1,3 +1,3 @@", "@@ -1,3 +1,4 @@"), "diff block 1")
	f("a diff of a file the release lacks", patches("--- a/a.go\t", "--- a/z.go\t"), "z.go is not in the release")
}
