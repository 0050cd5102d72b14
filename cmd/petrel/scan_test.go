package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestScanCommand(t *testing.T) {
	evs := toolEvents()
	data := fillStore(t, evs)
	f := func(want []string, wantErr string, args ...string) {
		t.Helper()
		out, errOut, err := runTool(t, scanCmd, "", append([]string{"--data", data}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if out == "" {
			got = nil
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%v: stdout\n%q\nwant\n%q", args, got, want)
		}
		if !strings.Contains(errOut, wantErr) {
			t.Fatalf("%v: stderr %q, want %q", args, errOut, wantErr)
		}
	}
	f([]string{"40"}, "", "--count")
	f([]string{"10"}, "", "--count", "--filter", `{"kinds":[7],"limit":2}`) // COUNT ignores limits
	f([]string{evs[39].ID.Hex(), evs[38].ID.Hex()}, "", "--ids", "--filter", `{"kinds":[7],"limit":2}`)
	f([]string{string(evs[39].Raw)}, "", "--filter", `{"limit":1}`)
	f(nil, "", "--filter", `{"authors":[]}`)
	f([]string{"10"}, "filter 0: index kind (K), 1 stream(s)", "--count", "--explain", "--filter", `{"kinds":[7]}`)
	f([]string{string(evs[31].Raw)}, "filter 0: index id (I", "--explain", "--filter", `{"ids":["`+evs[31].ID.Hex()+`"]}`)
	f([]string{"31"}, "filter 1: index tag value (T)", "--explain", "--count", "--filter",
		`[{"authors":["`+evs[0].PubKey.Hex()+`"],"limit":1},{"#e":["`+evs[0].ID.Hex()+`"]}]`)
	f([]string{"2"}, "2 events in", "--explain", "--count", "--filter", `{"kinds":[1]}`, "--since", "1700000014")

	// A search is planned on the search index (it used to be explained as
	// "matches nothing" and then answered).
	out, errOut, err := runTool(t, scanCmd, "", "--data", data, "--explain", "--filter", `{"search":"note","limit":2}`)
	if err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(errOut, "filter 0: search index (S)") || strings.Contains(errOut, "matches nothing") {
		t.Fatalf("search --explain: %v\nstdout %q\nstderr %q", err, out, errOut)
	}

	// The filter as the argument, as strfry takes it; relative times.
	f([]string{"10"}, "", `{"kinds":[7]}`, "--count")
	f([]string{"40"}, "", `{"until":"1h"}`, "--count")
	f([]string{"0"}, "", `{"since":"1h"}`, "--count")
	f([]string{"0"}, "", "--count", "--since", "1h")

	bad := func(want string, args ...string) {
		t.Helper()
		_, _, err := runTool(t, scanCmd, "", args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: error %v, want %q", args, err, want)
		}
	}
	bad("exclude each other", "--data", data, "--count", "--ids")
	bad("--filter", "--data", data, "--filter", "[")
	bad("not both", "--data", data, `{"kinds":[7]}`, "--filter", `{"kinds":[1]}`)
	bad(`unknown filter key "kind"`, "--data", data, `{"kind":[7]}`, "--count")
	bad("accepts at most 1 arg", "--data", data, `{}`, `{}`)
	bad("no store", "--data", filepath.Join(t.TempDir(), "none"))
	openStoreAt(t, data)
	bad("is petrel serve running?", "--data", data, "--count")
}

// TestToolsRefuseUnknownFilterKeys: every tool that takes a JSON filter
// refuses an unknown key before touching a store or a relay (it used to be
// skipped, and scan --count then counted the whole store).
func TestToolsRefuseUnknownFilterKeys(t *testing.T) {
	data := fillStore(t, toolEvents())
	const want = `unknown filter key "kind" (did you mean "kinds"?)`
	for _, c := range []struct {
		name string
		cmd  func() *cobra.Command
		args []string
	}{
		{"scan", scanCmd, []string{"--count"}},
		{"export", exportCmd, nil},
		{"delete", deleteCmd, []string{"--dry-run"}},
	} {
		_, _, err := runTool(t, c.cmd, "", append([]string{"--data", data, "--filter", `{"kind":[1]}`}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", c.name, err, want)
		}
	}
	if _, err := runSyncCmd(t, nil, "ws://127.0.0.1:1", "--quiet", "--filter", `{"kind":[1]}`); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("sync: error %v, want %q", err, want)
	}
	if _, err := runSyncCmd(t, nil, "ws://127.0.0.1:1", "--quiet", "--filter", `[{},{}]`); err == nil || !strings.Contains(err.Error(), "one filter") {
		t.Errorf("sync with two filters: %v", err)
	}
}
