package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestToolsBinary builds petrel and runs import -> export -> import
// through it, as an operator would, then checks that a held data
// directory is refused.
func TestToolsBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	dir := t.TempDir()
	bin := petrelBin(t)
	run := func(stdin string, args ...string) (string, string, error) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "PETREL_CONFIG=")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}

	var events []*nostr.Event
	var input bytes.Buffer
	for i := range 300 {
		k := relaytest.NewKey(fmt.Sprintf("binary-%d", i%3))
		ev := k.Event(1, fmt.Sprintf("note %d", i), nil, fixtureBase+int64(i))
		events = append(events, ev)
		input.Write(ev.Raw)
		input.WriteByte('\n')
	}
	in := filepath.Join(dir, "in.jsonl.gz")
	writeFile(t, in, gzipBytes(t, input.Bytes()))

	data := filepath.Join(dir, "data")
	out, errOut, err := run("", "import", "--data", data, in)
	if err != nil || !strings.Contains(out, "stored 300, duplicate 0") {
		t.Fatalf("import: %v\n%s\n%s", err, out, errOut)
	}
	exported := filepath.Join(dir, "out.jsonl")
	if _, errOut, err := run("", "export", "--data", data, "-o", exported); err != nil {
		t.Fatalf("export: %v\n%s", err, errOut)
	}
	lines := readLines(t, exported)
	if !sameSet(lines, raws(events)) {
		t.Fatalf("export wrote %d lines, not the 300 imported events", len(lines))
	}
	checkOrder(t, lines, true)

	// Through a pipe: export to stdout, import from stdin.
	stdout, _, err := run("", "export", "--data", data, "--oldest-first", "-q")
	if err != nil {
		t.Fatal(err)
	}
	data2 := filepath.Join(dir, "data2")
	if out, errOut, err := run(stdout, "import", "--data", data2, "--no-verify", "-"); err != nil || !strings.Contains(out, "stored 300") {
		t.Fatalf("import from stdin: %v\n%s\n%s", err, out, errOut)
	}
	if out, _, err := run("", "scan", "--data", data2, "--count"); err != nil || out != "300\n" {
		t.Fatalf("scan --count: %v %q", err, out)
	}

	// With the postgres backend, backup and compact refuse at once, in
	// one line, without reaching for the database.
	for _, args := range [][]string{{"backup", filepath.Join(dir, "pgb")}, {"compact"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "PETREL_CONFIG=", "PETREL_STORE_BACKEND=postgres", "PETREL_STORE_POSTGRES_URL=postgres://nobody@127.0.0.1:1/none")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		msg := errb.String()
		if err == nil || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "petrel: "+args[0]+" works on the embedded pebble store only") {
			t.Fatalf("%v with the postgres backend: %v\n%s", args, err, msg)
		}
	}

	// A data directory held by another process (here, this test, as
	// petrel serve would) is refused by every tool.
	openStoreAt(t, data)
	for _, args := range [][]string{
		{"import", in}, {"export"}, {"scan", "--count"}, {"delete", "--filter", "{}", "--all", "--yes"},
		{"compact"}, {"backup", filepath.Join(dir, "b")},
	} {
		_, errOut, err := run("", append(args, "--data", data)...)
		if err == nil || !strings.Contains(errOut, "is petrel serve running?") {
			t.Fatalf("%v on a held store: %v\n%s", args, err, errOut)
		}
	}
}
