package main

import (
	"os"
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
