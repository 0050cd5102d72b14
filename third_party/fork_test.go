package thirdparty

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// module is a module of petrel's replaced by a fork: its path and the
// version required (the release the fork was taken from), and the fork's
// directory relative to petrel's root.
type module struct {
	Path, Version, Dir string
}

// goCmd returns a go command run in dir, for this toolchain only, with no
// GOFLAGS of the caller's (-mod=mod would let it rewrite go.mod).
func goCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
	return cmd
}

// forks returns petrel's modules replaced by a directory under
// third_party, read from go.mod alone (no network, no module cache).
func forks(t *testing.T) []module {
	t.Helper()
	cmd := goCmd("..", "mod", "edit", "-json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v %s", err, stderr.String())
	}
	type modVer struct{ Path, Version string }
	var gomod struct {
		Require []modVer
		Replace []struct{ Old, New modVer }
	}
	if err := json.Unmarshal(out, &gomod); err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var forks []module
	for _, r := range gomod.Replace {
		if r.New.Version != "" || !strings.HasPrefix(r.New.Path, "./third_party/") {
			continue
		}
		m := module{Path: r.Old.Path, Version: r.Old.Version, Dir: r.New.Path}
		for _, req := range gomod.Require {
			if req.Path == m.Path && m.Version == "" {
				m.Version = req.Version
			}
		}
		if m.Version == "" {
			t.Fatalf("%s is replaced by %s but not required", m.Path, m.Dir)
		}
		forks = append(forks, m)
	}
	return forks
}

// networkTrouble reports whether go's output says it could not reach the
// network (as opposed to any other failure, which is the test's).
func networkTrouble(out string) bool {
	for _, s := range []string{"dial tcp", "no such host", "network is unreachable", "connection refused", "i/o timeout", "TLS handshake timeout", "temporary failure in name resolution"} {
		if strings.Contains(strings.ToLower(out), strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// release downloads m's released version into the module cache (from
// the cache itself if it is there) and returns its directory. It skips
// the test when the download fails for want of a network.
func release(t *testing.T, m module) string {
	t.Helper()
	// Run outside petrel's module, so go.mod and go.sum are never touched.
	cmd := goCmd(t.TempDir(), "mod", "download", "-json", m.Path+"@"+m.Version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var dl struct {
		Dir, Sum, Error string
	}
	_ = json.Unmarshal(out, &dl)
	if err != nil || dl.Error != "" {
		msg := dl.Error + " " + stderr.String()
		if networkTrouble(msg) {
			t.Skipf("cannot check the fork of %s: %s@%s is not in the module cache and the module proxy is unreachable: %s", m.Path, m.Path, m.Version, msg)
		}
		t.Fatalf("go mod download %s@%s: %v %s", m.Path, m.Version, err, msg)
	}
	// It must be the release the fork's PATCHES.md pins, on a line
	// "Release: <path> <version> <h1 hash>" (go.sum is not the place: go
	// mod tidy drops the lines of a module replaced by a directory).
	doc, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(m.Dir), "PATCHES.md"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "Release:" && f[1] == m.Path && f[2] == m.Version {
			if f[3] != dl.Sum {
				t.Fatalf("%s@%s: downloaded %s, PATCHES.md pins %s", m.Path, m.Version, dl.Sum, f[3])
			}
			pinned = true
		}
	}
	if !pinned {
		t.Fatalf("%s@%s: PATCHES.md has no line \"Release: %s %s h1:...\"", m.Path, m.Version, m.Path, m.Version)
	}
	return dl.Dir
}

// TestForksMatchPatches: every fork under third_party is its release, less
// the files its PATCHES.md leaves out, with PATCHES.md's diffs applied,
// plus the tests PATCHES.md names; nothing else.
func TestForksMatchPatches(t *testing.T) {
	fs := forks(t)
	if len(fs) == 0 {
		t.Fatal("no module of petrel's is replaced by a directory under third_party")
	}
	for _, m := range fs {
		t.Run(m.Path, func(t *testing.T) {
			dir := release(t, m)
			for _, err := range checkFork(dir, filepath.Join("..", filepath.FromSlash(m.Dir))) {
				t.Error(err)
			}
		})
	}
}
