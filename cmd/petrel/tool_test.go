package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// quietLog discards the store's messages in tests.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// runTool runs one subcommand made by newCmd with args, stdin as its
// input, and returns its stdout, stderr and error.
func runTool(t *testing.T, newCmd func() *cobra.Command, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := newCmd()
	var out, errb bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

// openStoreAt opens the pebble store in dir for a test; it is closed at
// the end of the test unless the test closed it.
func openStoreAt(t *testing.T, dir string) *pebble.Store {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Path: dir, Logger: quietLog, PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// storedRaws returns the raw JSON of every event in the store in dir,
// newest first, opening and closing the store.
func storedRaws(t *testing.T, dir string) []string {
	t.Helper()
	st := openStoreAt(t, dir)
	defer st.Close()
	var out []string
	err := queryEach(context.Background(), st, []nostr.Filter{{}}, func(r *storeRecord) error {
		out = append(out, string(r.Raw))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readLines returns the lines of a file, gunzipped when it is gzip.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gzipBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestOpenToolStore(t *testing.T) {
	cfg := config.Config{}.Normalize()
	f := func(path string, o toolStoreOptions, want error) {
		t.Helper()
		cfg.Store.Path = path
		st, err := openToolStore(cfg, quietLog, o)
		if want == nil {
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			st.Close()
			return
		}
		if !errors.Is(err, want) {
			t.Fatalf("%s: error %v, want %v", path, err, want)
		}
	}
	dir := t.TempDir()
	f(filepath.Join(dir, "missing"), toolStoreOptions{}, errNoStore)
	f(dir, toolStoreOptions{}, errNoStore) // empty directory
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused open made the missing directory: %v", err)
	}
	// A directory of other files (a mistyped --data): refused, read-only
	// or not, and left as it was.
	other := filepath.Join(dir, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	f(other, toolStoreOptions{}, errNoStore)
	f(other, toolStoreOptions{readOnly: true}, errNoStore)
	f(other, toolStoreOptions{create: true}, pebble.ErrForeignDir) // import's open
	if ents, _ := os.ReadDir(other); len(ents) != 1 {
		t.Fatalf("a refused open wrote into the directory: %v", ents)
	}
	f(filepath.Join(dir, "new"), toolStoreOptions{create: true}, nil)
	f(filepath.Join(dir, "new"), toolStoreOptions{}, nil)

	held := openStoreAt(t, filepath.Join(dir, "held"))
	f(filepath.Join(dir, "held"), toolStoreOptions{}, errStoreLocked)
	held.Close()
	f(filepath.Join(dir, "held"), toolStoreOptions{}, nil)

	cfg.Store.Backend = "postgres"
	if _, err := openToolStore(cfg, quietLog, toolStoreOptions{}); err == nil || !strings.Contains(err.Error(), "postgres_url") {
		t.Fatalf("postgres backend without a URL: %v", err)
	}
	cfg.Store.Backend = "sqlite"
	if _, err := openToolStore(cfg, quietLog, toolStoreOptions{}); err == nil || !strings.Contains(err.Error(), "want pebble or postgres") {
		t.Fatalf("unknown backend: %v", err)
	}
	if !strings.Contains(errStoreLocked.Error(), "is petrel serve running?") {
		t.Fatal("the lock error must ask whether petrel serve is running")
	}
}

func TestParseFilters(t *testing.T) {
	f := func(s string, want int, wantErr string) {
		t.Helper()
		got, err := parseFilters(s)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("%s: error %v, want %q", s, err, wantErr)
			}
			return
		}
		if err != nil || len(got) != want {
			t.Fatalf("%s: %d filters, %v", s, len(got), err)
		}
	}
	f(`{}`, 1, "")
	f(` {"kinds":[1],"limit":3} `, 1, "")
	f(`[{"kinds":[1]},{"authors":[]}]`, 2, "")
	f(`[]`, 0, "empty array")
	f(`[{"kinds":"x"}]`, 0, "filter 0")
	f(`{kinds`, 0, "nostr:")
	f(`[{"kinds":[1]},]`, 0, "not a JSON array")
	// Unknown keys are errors in the tools: a typo must not widen the
	// filter to every event.
	f(`{"kind":[1]}`, 0, `unknown filter key "kind" (did you mean "kinds"?)`)
	f(`[{"kinds":[1]},{"authrs":[]}]`, 0, `filter 1: unknown filter key "authrs"`)
	f(`{"since":5,"since":"1h"}`, 0, `duplicate key "since"`)
	f(`{"since":"1h","since":5}`, 0, "since")
	f(`{"since":"yesterday"}`, 0, `since: "yesterday": want now, unix seconds, RFC 3339 or an age`)
	f(`{"until":-1}`, 0, "until")

	// Relative and RFC 3339 times.
	now := time.Unix(1_700_000_000, 0)
	at := func(s string, since, until int64) {
		t.Helper()
		fl, err := parseFiltersAt(s, now)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if fl[0].HasSince != (since >= 0) || fl[0].HasSince && fl[0].Since != since || fl[0].HasUntil != (until >= 0) || fl[0].HasUntil && fl[0].Until != until {
			t.Fatalf("%s: since %v %d, until %v %d; want %d, %d", s, fl[0].HasSince, fl[0].Since, fl[0].HasUntil, fl[0].Until, since, until)
		}
	}
	at(`{"since":"1h"}`, 1_700_000_000-3600, -1)
	at(`{"since":"2d","until":"now","kinds":[1]}`, 1_700_000_000-2*86400, 1_700_000_000)
	at(`{"until":"2023-11-14T22:13:20Z"}`, -1, 1_700_000_000)
	at(`{"since":5,"until":6}`, 5, 6)
	at(`{"#t":["since"]}`, -1, -1)

	all := func(s string, want bool) {
		t.Helper()
		fl, err := parseFilters(s)
		if err != nil {
			t.Fatal(err)
		}
		if matchesAll(fl) != want {
			t.Fatalf("matchesAll(%s) = %v", s, !want)
		}
	}
	all(`{}`, true)
	all(`[{"kinds":[1]},{}]`, true)
	all(`{"kinds":[1]}`, false)
	all(`{"limit":5}`, false)
	all(`{"since":5}`, false)
}

func TestFilterFlagsTimes(t *testing.T) {
	ff := filterFlags{filter: `[{"kinds":[1]},{"kinds":[2]}]`, since: "2023-11-14T22:13:20Z", until: "1700000100"}
	fl, err := ff.filters()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range fl {
		if !x.HasSince || x.Since != 1_700_000_000 || !x.HasUntil || x.Until != 1_700_000_100 {
			t.Fatalf("filter %+v", x)
		}
	}
	ff.since = "yesterday"
	if _, err := ff.filters(); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Fatalf("bad --since: %v", err)
	}
}

func TestOutputAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl.gz")
	o, err := createOutput(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(o, "a\nb\n")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the output exists under its name before commit")
	}
	if err := o.commit(); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("lines %q", got)
	}
	o, err = createOutput(filepath.Join(dir, "dropped.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(o, "partial")
	o.abort()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("files left: %v", ents)
	}
}

func TestHumanBytes(t *testing.T) {
	f := func(n int64, want string) {
		t.Helper()
		if got := humanBytes(n); got != want {
			t.Fatalf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	f(0, "0 B")
	f(1023, "1023 B")
	f(1024, "1.0 KiB")
	f(1536, "1.5 KiB")
	f(5<<30, "5.0 GiB")
}

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), make([]byte, 100))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	writeFile(t, filepath.Join(dir, "sub", "b"), make([]byte, 23))
	if n, err := dirSize(dir); err != nil || n != 123 {
		t.Fatalf("dirSize = %d, %v", n, err)
	}
	if _, err := dirSize(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("dirSize of a missing directory succeeded")
	}
}

// The scan and delete filters read the NIP-19 forms too.
func TestParseFiltersBech32(t *testing.T) {
	pk := nostr.SecretKeyFromSeed([]byte("scan")).PubKey()
	fl, err := parseFilters(`{"authors":["` + nip19.EncodePubKey(pk) + `"],"kinds":[1]}`)
	if err != nil || len(fl) != 1 || len(fl[0].Authors) != 1 || fl[0].Authors[0] != pk {
		t.Fatalf("got %+v, %v", fl, err)
	}
	if _, err := parseFilters(`{"ids":["` + nip19.EncodePubKey(pk) + `"]}`); err == nil || !strings.Contains(err.Error(), "not an event id") {
		t.Fatalf("an npub as an id: %v", err)
	}
}
