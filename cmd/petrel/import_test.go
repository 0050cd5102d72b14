package main

// The pipeline of `petrel import` is internal/importer's, tested there;
// these tests cover the command: input files and stdin, gzip, the flags,
// relay.url from the config, the summary and the JSON result.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/importer"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
)

// storeRecord is store.Record, for the helpers.
type storeRecord = store.Record

const fixtureBase = 1_700_000_000

// importCmdInput is a small JSONL input with a line of each outcome the
// command's output names, and the counts it gives when relay.url is not
// set. Refused lines: 6 (invalid) and 7 (bad signature).
func importCmdInput() (data []byte, want importer.Counts) {
	k := relaytest.NewKey("import-cmd")
	var notes []*nostr.Event
	for i := range 4 {
		notes = append(notes, k.Event(1, fmt.Sprintf("note %d", i), nil, fixtureBase+int64(i)))
	}
	bad := notes[3]
	sig := bad.Sig.Hex()
	flipped := "0"
	if sig[len(sig)-1] == '0' {
		flipped = "1"
	}
	badSig := strings.Replace(string(bad.Raw), sig, sig[:len(sig)-1]+flipped, 1)
	vanish := relaytest.NewKey("import-cmd-vanish").Event(62, "", nostr.Tags{{"relay", "wss://relay.example.com"}}, fixtureBase)
	lines := []string{
		string(notes[0].Raw),                     // 1 stored
		`["EVENT",` + string(notes[1].Raw) + `]`, // 2 stored
		"",                                       // 3 blank
		string(notes[0].Raw),                     // 4 duplicate
		`["EOSE","s"]`,                           // 5 message
		`not json`,                               // 6 invalid
		badSig,                                   // 7 bad signature
		string(vanish.Raw),                       // 8 vanish for another relay
		string(notes[2].Raw),                     // 9 stored
	}
	want = importer.Counts{Lines: 9, Blank: 1, Messages: 1, Events: 6, Stored: 3, Duplicate: 1,
		VanishElsewhere: 1, Invalid: 1, BadSig: 1}
	return []byte(strings.Join(lines, "\n") + "\n"), want
}

// TestImportCommand runs `petrel import` on plain, gzip-named and
// gzip-sniffed files and on stdin, each into a fresh store, and checks
// that every flag reaches the import.
func TestImportCommand(t *testing.T) {
	input, want := importCmdInput()
	dir := t.TempDir()
	plain := filepath.Join(dir, "events.jsonl")
	gz := filepath.Join(dir, "events.jsonl.gz")
	sniffed := filepath.Join(dir, "events.dump")
	writeFile(t, plain, input)
	writeFile(t, gz, gzipBytes(t, input))
	writeFile(t, sniffed, gzipBytes(t, input))
	f := func(want importer.Counts, wantErrs []int64, stdin string, args ...string) {
		t.Helper()
		data := filepath.Join(t.TempDir(), "data")
		out, _, err := runTool(t, importCmd, stdin, append([]string{"--data", data, "--json", "-q"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var res importer.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if res.Counts != want || res.Bytes != int64(len(input)) {
			t.Fatalf("%v: counts\n got %+v (%d bytes)\nwant %+v (%d bytes)", args, res.Counts, res.Bytes, want, len(input))
		}
		var lines []int64
		for _, e := range res.Errors {
			lines = append(lines, e.Line)
		}
		if fmt.Sprint(lines) != fmt.Sprint(wantErrs) {
			t.Fatalf("%v: refused lines %v, want %v", args, lines, wantErrs)
		}
		if n := len(storedRaws(t, data)); n != int(want.Stored) {
			t.Fatalf("%v: store holds %d events, want %d", args, n, want.Stored)
		}
	}
	f(want, []int64{6, 7}, "", plain)
	f(want, []int64{6, 7}, "", gz)
	f(want, []int64{6, 7}, "", sniffed)
	f(want, []int64{6, 7}, "", "--gzip", gz)
	f(want, []int64{6, 7}, string(input))
	f(want, []int64{6, 7}, string(input), "-")
	f(want, []int64{6, 7}, "", "--batch", "1", "--workers", "1", plain)
	f(want, []int64{6}, "", "--show-errors", "1", plain)

	noVerify := want
	noVerify.BadSig, noVerify.Stored = 0, want.Stored+1
	f(noVerify, []int64{6}, "", "--no-verify", plain)

	// Every line but the blank one and the EOSE is longer than 20 bytes.
	short := importer.Counts{Lines: 9, Blank: 1, Messages: 1, Invalid: 7}
	f(short, []int64{1, 2}, "", "--max-line-bytes", "20", "--show-errors", "2", plain)

	// The JSON names are the documented ones.
	out, _, err := runTool(t, importCmd, "", "--data", filepath.Join(t.TempDir(), "d"), "--json", "-q", plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"lines":9`, `"skipped_messages":1`, `"vanish_for_other_relay":1`, `"bad_sig":1`, `"invalid":1`, `"errors":[{"line":6,`} {
		if !strings.Contains(out, s) {
			t.Fatalf("JSON lacks %s:\n%s", s, out)
		}
	}

	// The summary names every outcome and the refused lines.
	out, _, err = runTool(t, importCmd, "", "--data", filepath.Join(t.TempDir(), "d"), "-q", plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"read 9 lines", "stored 3, duplicate 1, superseded 0, deleted 0", "vanish for another relay 1, other messages 1, blank 1",
		"invalid 1, bad id 0, bad signature 1", "line 7: bad signature (id ", "line 6: event must be a JSON object\n"} {
		if !strings.Contains(out, s) {
			t.Fatalf("summary lacks %q:\n%s", s, out)
		}
	}

	// A missing input creates no store; a held store is refused.
	data := filepath.Join(t.TempDir(), "data")
	if _, _, err := runTool(t, importCmd, string(input), "--data", data, ""); err == nil || !strings.Contains(err.Error(), `no file given (""): give a JSONL file, or "-" for stdin`) {
		t.Fatalf(`import "": %v`, err)
	}
	if _, _, err := runTool(t, importCmd, "", "--data", data, filepath.Join(dir, "nope.jsonl")); err == nil {
		t.Fatal("import of a missing file succeeded")
	}
	if _, err := os.Stat(data); err == nil {
		t.Fatal("import of a missing file created the store")
	}
	// Nor does a directory given as the input (it opens, and failed only
	// at its first read).
	if _, _, err := runTool(t, importCmd, "", "--data", data, dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("import of a directory: %v", err)
	}
	if _, err := os.Stat(data); err == nil {
		t.Fatal("import of a directory created the store")
	}
	openStoreAt(t, data)
	if _, _, err := runTool(t, importCmd, "", "--data", data, plain); err == nil || !strings.Contains(err.Error(), "is petrel serve running?") {
		t.Fatalf("import into a held store: %v", err)
	}
}

// TestImportCommandRelayURL: relay.url from the config decides which
// requests to vanish apply, and one the relay would refuse to start with
// is refused before any store is made.
func TestImportCommandRelayURL(t *testing.T) {
	input, want := importCmdInput()
	dir := t.TempDir()
	plain := filepath.Join(dir, "events.jsonl")
	writeFile(t, plain, input)
	f := func(url string) (importer.Counts, string, error) {
		t.Helper()
		conf := filepath.Join(t.TempDir(), "petrel.toml")
		writeFile(t, conf, fmt.Appendf(nil, "[relay]\nurl = %q\n", url))
		data := filepath.Join(t.TempDir(), "data")
		out, _, err := runTool(t, importCmd, "", "--config", conf, "--data", data, "--json", "-q", plain)
		var res importer.Result
		if err == nil {
			if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
				t.Fatalf("%v\n%s", jerr, out)
			}
		}
		return res.Counts, data, err
	}
	ours := want
	ours.VanishElsewhere, ours.Stored = 0, want.Stored+1
	if got, _, err := f("WSS://Relay.Example.com:443/"); err != nil || got != ours {
		t.Fatalf("relay.url names the relay: %v\n got %+v\nwant %+v", err, got, ours)
	}
	if got, _, err := f("wss://relay.example.com/?x=1"); err != nil || got != want {
		t.Fatalf("relay.url with a query: %v\n got %+v\nwant %+v", err, got, want)
	}
	_, data, err := f("wss://:443")
	if !errors.Is(err, nostr.ErrRelayURL) || !strings.Contains(err.Error(), "relay.url") {
		t.Fatalf("relay.url with an empty host: %v", err)
	}
	if _, err := os.Stat(data); err == nil {
		t.Fatal("an import refused for its relay.url created the store")
	}
}

// TestImportStrict: --strict exits with an error when a line was refused,
// after saving the others; without refused lines it succeeds.
func TestImportStrict(t *testing.T) {
	input, want := importCmdInput()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	writeFile(t, path, input)
	data := filepath.Join(t.TempDir(), "data")
	out, _, err := runTool(t, importCmd, "", "--data", data, "-q", "--strict", path)
	if err == nil || !strings.Contains(err.Error(), "--strict: 2 of 9 lines refused") {
		t.Fatalf("--strict with 2 refused lines: %v", err)
	}
	if !strings.Contains(out, fmt.Sprintf("stored %d,", want.Stored)) {
		t.Fatalf("--strict summary: %q", out)
	}
	if n := len(storedRaws(t, data)); n != int(want.Stored) {
		t.Fatalf("--strict stored %d events, want %d", n, want.Stored)
	}
	// Without refused lines (duplicates, blank lines and messages are not
	// refusals), --strict succeeds.
	var clean []string
	for i, l := range strings.Split(strings.TrimSuffix(string(input), "\n"), "\n") {
		if i != 5 && i != 6 { // lines 6 and 7
			clean = append(clean, l)
		}
	}
	if _, _, err := runTool(t, importCmd, strings.Join(clean, "\n"), "--data", data, "-q", "--strict"); err != nil {
		t.Fatalf("--strict without refused lines: %v", err)
	}
}

// TestImportBOM: a byte order mark before the first line (as some
// Windows tools write UTF-8) is not taken for part of the first event,
// in a plain file, a gzip one and on stdin.
func TestImportBOM(t *testing.T) {
	input, want := importCmdInput()
	withBOM := append([]byte("\ufeff"), input...)
	dir := t.TempDir()
	plain := filepath.Join(dir, "events.jsonl")
	gz := filepath.Join(dir, "events.jsonl.gz")
	writeFile(t, plain, withBOM)
	writeFile(t, gz, gzipBytes(t, withBOM))
	for _, tc := range []struct{ stdin, path string }{{"", plain}, {"", gz}, {string(withBOM), "-"}} {
		data := filepath.Join(t.TempDir(), "data")
		out, _, err := runTool(t, importCmd, tc.stdin, "--data", data, "--json", "-q", tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		var res importer.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v\n%s", tc.path, err, out)
		}
		if res.Counts.Stored != want.Stored || res.Counts.Invalid != want.Invalid {
			t.Fatalf("%s: counts %+v, want %d stored and %d invalid", tc.path, res.Counts, want.Stored, want.Invalid)
		}
	}
}

// TestImportTerminal: with no file and a terminal for stdin, import
// refuses to wait silently; with "-" it says what it waits for.
func TestImportTerminal(t *testing.T) {
	stdinIsTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = defaultStdinIsTerminal })
	data := filepath.Join(t.TempDir(), "data")
	_, _, err := runTool(t, importCmd, "", "--data", data)
	if err == nil || !strings.Contains(err.Error(), "no input: give a JSONL file") {
		t.Fatalf("no file on a terminal: %v", err)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused import made a store: %v", err)
	}
	ev := relaytest.NewKey("import-tty").Event(1, "typed", nil, fixtureBase)
	out, errOut, err := runTool(t, importCmd, string(ev.Raw)+"\n", "--data", data, "-q", "-")
	if err != nil || !strings.Contains(errOut, "reading events from the terminal") || !strings.Contains(out, "stored 1,") {
		t.Fatalf("\"-\" on a terminal: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
}

// TestImportDropsRecycledLogs: pebble keeps the write-ahead logs of
// flushed memtables for reuse and leaves them behind at Close; the
// import ends by reopening the store, which deletes them, so the data
// directory holds no log of a full memtable's size afterwards.
func TestImportDropsRecycledLogs(t *testing.T) {
	const memtable = 256 << 10
	t.Setenv("PETREL_STORE_MEMTABLE_BYTES", fmt.Sprint(memtable))
	k := relaytest.NewKey("import-logs")
	var input strings.Builder
	const events = 3000 // about 3 MB: a dozen memtables
	for i := range events {
		input.WriteString(string(k.Event(1, fmt.Sprintf("note %d %s", i, strings.Repeat("x", 900)), nil, fixtureBase+int64(i)).Raw))
		input.WriteByte('\n')
	}
	in := filepath.Join(t.TempDir(), "events.jsonl")
	writeFile(t, in, []byte(input.String()))
	data := filepath.Join(t.TempDir(), "data")
	if _, _, err := runTool(t, importCmd, "", "--data", data, "-q", in); err != nil {
		t.Fatal(err)
	}
	checkNoRecycledLogs(t, data, memtable)
	if n := len(storedRaws(t, data)); n != events {
		t.Fatalf("store holds %d events, want %d", n, events)
	}
}

// checkNoRecycledLogs fails if the pebble data directory holds
// write-ahead logs of a memtable's size or more in all: logs pebble kept
// for reuse, each about a memtable's worth.
func checkNoRecycledLogs(t *testing.T, data string, memtable int64) {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(data, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	if total >= memtable {
		t.Fatalf("%d write-ahead logs left, %d bytes in all (a memtable is %d): %v", len(logs), total, memtable, logs)
	}
}

// TestImportVanishGiftWraps: a request to vanish in an import removes the
// gift wraps addressed to its author up to its created_at, whether they
// come before it in the file or after it (NIP-62), as a published one
// does; a later wrap, and wraps to others, stay.
func TestImportVanishGiftWraps(t *testing.T) {
	gone := relaytest.NewKey("import-vanish-author")
	sender := relaytest.NewKey("import-vanish-sender")
	other := relaytest.NewKey("import-vanish-other")
	to := func(k relaytest.Key) nostr.Tags { return nostr.Tags{{"p", k.PK.Hex()}} }
	before := sender.Event(1059, "wrap", to(gone), fixtureBase+1)
	toOther := sender.Event(1059, "wrap", to(other), fixtureBase+2)
	vanish := gone.Event(62, "", nostr.Tags{{"relay", "ALL_RELAYS"}}, fixtureBase+10)
	after := sender.Event(1059, "wrap", to(gone), fixtureBase+3) // older than the request, after it in the file
	later := sender.Event(1059, "wrap", to(gone), fixtureBase+20)
	lines := []string{string(before.Raw), string(toOther.Raw), string(vanish.Raw), string(after.Raw), string(later.Raw)}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	writeFile(t, path, []byte(strings.Join(lines, "\n")+"\n"))
	data := filepath.Join(t.TempDir(), "data")
	if out, _, err := runTool(t, importCmd, "", "--data", data, "-q", path); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, raw := range storedRaws(t, data) {
		got[string(raw)] = true
	}
	for name, ev := range map[string]*nostr.Event{"earlier wrap": before, "wrap after the request in the file": after} {
		if got[string(ev.Raw)] {
			t.Errorf("%s to the vanished author is still stored", name)
		}
	}
	for name, ev := range map[string]*nostr.Event{"wrap to another": toOther, "request": vanish, "later wrap": later} {
		if !got[string(ev.Raw)] {
			t.Errorf("%s is not stored", name)
		}
	}
}
