package main

import "testing"

// A run that names no command builds them all, the client commands
// (internal/cli) and the relay's, each name once.
func TestRootCommands(t *testing.T) {
	names := map[string]bool{}
	for _, c := range newRoot([]string{"petrel"}).Commands() {
		if names[c.Name()] {
			t.Errorf("%q registered twice", c.Name())
		}
		names[c.Name()] = true
	}
	for _, want := range []string{"serve", "req", "version", "import", "bench"} {
		if !names[want] {
			t.Errorf("no %q command", want)
		}
	}
}
