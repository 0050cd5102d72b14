package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEGoVersion: the README names the exact Go version go.mod
// requires (GOTOOLCHAIN=local: an older one refuses to build).
func TestREADMEGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + string(m[1]) + ","; !strings.Contains(string(readme), want) {
		t.Fatalf("README.md does not say %q (go.mod requires %s)", want, m[1])
	}
}

// TestMakeRunArgs: make run ARGS="..." hands ARGS to petrel serve (through
// scripts/run.sh), as the README says.
func TestMakeRunArgs(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", "-n", "-C", "../..", "run", "ARGS=--listen 127.0.0.1:7448 --config petrel.toml")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "./scripts/run.sh --listen 127.0.0.1:7448 --config petrel.toml") {
		t.Fatalf("make run does not pass ARGS on:\n%s", out)
	}
	run, err := os.ReadFile("../../scripts/run.sh")
	if err != nil || !strings.Contains(string(run), `exec ./bin/petrel serve "$@"`) {
		t.Fatalf("scripts/run.sh does not hand its arguments to petrel serve: %v", err)
	}
}
