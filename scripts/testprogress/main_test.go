package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProgress runs testprogress on a module of its own with a passing
// package, a failing one, one that does not build and one without tests:
// a line per package, the failed test's output (the end of it when it is
// long), the closing counts and
// exit status 1; and status 0 on the passing package alone.
func TestProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":             "module example.com/m\n\ngo 1.22\n",
		"good/good_test.go":  "package good\nimport \"testing\"\nfunc TestA(t *testing.T) {}\nfunc TestB(t *testing.T) { t.Run(\"sub\", func(t *testing.T) {}) }\nfunc TestC(t *testing.T) { t.Skip(\"not here\") }\n",
		"bad/bad_test.go":    "package bad\nimport \"testing\"\nfunc TestOK(t *testing.T) {}\nfunc TestBroken(t *testing.T) { t.Log(\"the why\"); t.Fatal(\"broken on purpose\") }\n",
		"nobuild/x_test.go":  "package nobuild\nimport \"testing\"\nfunc TestX(t *testing.T) { undefined() }\n",
		"notests/notests.go": "package notests\n",
		// A chatty test's failure message comes after megabytes of log.
		"chatty/chatty_test.go": "package chatty\nimport (\"strings\"; \"testing\")\nfunc TestChatty(t *testing.T) { t.Parallel(); for i := 0; i < 20000; i++ { t.Log(strings.Repeat(\"x\", 100)) }; t.Error(\"the failure at the end\") }\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "testprogress")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("-j", "2", "./...", "--", "-count=1")
	for _, want := range []string{
		"ok   example.com/m/good ", "(2 passed, 1 skipped)",
		"FAIL example.com/m/bad ", "(1 passed, 1 failed)", "the why", "broken on purpose",
		"FAIL example.com/m/nobuild ", "undefined",
		"FAIL example.com/m/chatty ", "the failure at the end", "bytes of output left out",
		"-    example.com/m/notests (no tests)",
		"FAILED: ", "\n3 passed, 2 failed, 1 skipped\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit status %d with failures, want 1", code)
	}
	if out, code := run("./good", "--", "-count=1"); code != 0 || !strings.HasSuffix(out, "2 passed, 0 failed, 1 skipped\n") {
		t.Errorf("passing package: exit %d\n%s", code, out)
	}
}
