package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/pgtest"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/postgres"
)

// needPostgres fails the test when the database cannot be reached,
// unless PETREL_TEST_POSTGRES=skip.
func needPostgres(t *testing.T) {
	t.Helper()
	if os.Getenv("PETREL_TEST_POSTGRES") == "skip" {
		t.Skip("PETREL_TEST_POSTGRES=skip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatalf("PostgreSQL at %s unreachable (set PETREL_TEST_POSTGRES_URL, or PETREL_TEST_POSTGRES=skip to skip): %v", pgtest.URL(), err)
	}
	c.Close(ctx)
}

var pgSchemaSeq atomic.Int64

// pgSchema returns the name of a schema no one uses, dropped with
// everything in it when the test ends.
func pgSchema(t *testing.T) string {
	t.Helper()
	needPostgres(t)
	name := fmt.Sprintf("petrel_tools_%d_%d", os.Getpid(), pgSchemaSeq.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, pgtest.URL())
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// schemaExists reports whether the schema is in the database.
func schemaExists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var ok bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// pgConfig writes a config file selecting the postgres backend with the
// given schema and returns its path.
func pgConfig(t *testing.T, schema string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pg.toml")
	writeFile(t, path, fmt.Appendf(nil, "[store]\nbackend = \"postgres\"\npostgres_url = %q\npostgres_schema = %q\n", pgtest.URL(), schema))
	return path
}

// openPG opens the postgres store in schema for a test (closed at its
// end unless the test closed it).
func openPG(t *testing.T, schema string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), postgres.Options{URL: pgtest.URL(), Schema: schema, Logger: quietLog, PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// jsonl is events as JSONL.
func jsonl(events []*nostr.Event) string {
	var b strings.Builder
	for _, ev := range events {
		b.Write(ev.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestToolsPostgres runs import, export, scan and delete against the
// postgres backend (selected by the config file), and compares export's
// output with the pebble store's for the same events, byte for byte.
func TestToolsPostgres(t *testing.T) {
	schema := pgSchema(t)
	pg := pgConfig(t, schema)
	evs := toolEvents()
	data := fillStore(t, evs)
	run := func(cmd func() *cobra.Command, stdin string, args ...string) (string, string) {
		t.Helper()
		out, errOut, err := runTool(t, cmd, stdin, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		}
		return out, errOut
	}

	// A store that does not exist is refused, and not created.
	missing := pgConfig(t, schema+"_none")
	for _, cmd := range []func() *cobra.Command{exportCmd, scanCmd} {
		if _, _, err := runTool(t, cmd, "", "--config", missing); !errors.Is(err, errNoPostgresStore) {
			t.Fatalf("missing schema: %v", err)
		}
	}
	if _, _, err := runTool(t, deleteCmd, "", "--config", missing, "--filter", `{"kinds":[1]}`, "--yes"); !errors.Is(err, errNoPostgresStore) {
		t.Fatalf("delete, missing schema: %v", err)
	}
	if schemaExists(t, schema+"_none") {
		t.Fatal("a tool created the schema it was asked to read")
	}

	// import creates the store.
	out, _ := run(importCmd, jsonl(evs), "--config", pg, "-q")
	if !strings.Contains(out, "stored 40, duplicate 0") {
		t.Fatalf("import: %s", out)
	}
	out, _ = run(importCmd, jsonl(evs), "--config", pg, "-q")
	if !strings.Contains(out, "stored 0, duplicate 40") {
		t.Fatalf("import again: %s", out)
	}

	// export: the same bytes from both stores, in both orders and with
	// or without limits (Scan or Query on postgres).
	for _, args := range [][]string{
		nil, {"--oldest-first"}, {"--filter", `{"kinds":[7]}`}, {"--filter", `{"limit":5}`},
		{"--filter", `[{"kinds":[1],"limit":3},{"#e":["` + evs[0].ID.Hex() + `"]}]`}, {"--since", "1700000005", "--oldest-first"},
	} {
		want, _ := run(exportCmd, "", append([]string{"--data", data, "-q"}, args...)...)
		got, _ := run(exportCmd, "", append([]string{"--config", pg, "-q"}, args...)...)
		if got != want || got == "" {
			t.Fatalf("export %v: postgres wrote\n%s\npebble\n%s", args, got, want)
		}
	}
	gz := filepath.Join(t.TempDir(), "all.jsonl.gz")
	out, _ = run(exportCmd, "", "--config", pg, "-o", gz)
	if lines := readLines(t, gz); !sameSet(lines, raws(evs)) || !strings.HasPrefix(out, "exported 40 events") {
		t.Fatalf("export -o: %d lines, %q", len(lines), out)
	}

	// scan, with the plans postgres shows.
	scan := func(wantOut, wantErr string, args ...string) {
		t.Helper()
		out, errOut := run(scanCmd, "", append([]string{"--config", pg}, args...)...)
		if out != wantOut {
			t.Fatalf("scan %v: stdout %q, want %q", args, out, wantOut)
		}
		if !strings.Contains(errOut, wantErr) {
			t.Fatalf("scan %v: stderr %q, want %q", args, errOut, wantErr)
		}
	}
	scan("40\n", "", "--count")
	scan("10\n", "filters: count of the union", "--count", "--explain", "--filter", `{"kinds":[7],"limit":2}`)
	scan(evs[39].ID.Hex()+"\n"+evs[38].ID.Hex()+"\n", "filter 0: plan kinds", "--ids", "--explain", "--filter", `{"kinds":[7],"limit":2}`)
	scan(string(evs[39].Raw)+"\n", "SQL: SELECT", "--explain", "--filter", `{"limit":1}`)
	scan(evs[31].ID.Hex()+"\n", "every match of any filter, newest first, streamed", "--ids", "--explain", "--filter", `{"ids":["`+evs[31].ID.Hex()+`"]}`)
	scan("2\n", "2 events in", "--explain", "--count", "--filter", `{"kinds":[1]}`, "--since", "1700000014")
	scan("", "filter 0: matches nothing", "--explain", "--filter", `{"authors":[],"limit":3}`)

	// delete: counted, confirmed, and not remembered (the events load
	// again).
	out, _ = run(deleteCmd, "", "--config", pg, "--filter", `{"kinds":[7]}`, "--dry-run")
	if !strings.Contains(out, "10 events match") {
		t.Fatalf("delete --dry-run: %s", out)
	}
	if _, _, err := runTool(t, deleteCmd, "", "--config", pg, "--filter", `{"kinds":[7]}`); err == nil || !strings.Contains(err.Error(), "without confirmation") {
		t.Fatalf("delete without --yes: %v", err)
	}
	out, _ = run(deleteCmd, "", "--config", pg, "--filter", `{"kinds":[7]}`, "--yes")
	if !strings.Contains(out, "deleted 10 of 10") {
		t.Fatalf("delete: %s", out)
	}
	scan("30\n", "", "--count")
	out, _ = run(importCmd, jsonl(evs), "--config", pg, "-q")
	if !strings.Contains(out, "stored 10, duplicate 30") {
		t.Fatalf("import after delete: %s", out)
	}
}

// TestPebbleOnlyToolsRefusePostgres: backup and compact fail at once,
// with one line naming what to use instead, when the backend is
// postgres (nothing is written, no database is needed).
func TestPebbleOnlyToolsRefusePostgres(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "pg.toml")
	writeFile(t, cfg, []byte("[store]\nbackend = \"postgres\"\npostgres_url = \"postgres://nobody@127.0.0.1:1/none\"\n"))
	dest := filepath.Join(t.TempDir(), "backup")
	f := func(cmd func() *cobra.Command, want string, args ...string) {
		t.Helper()
		_, _, err := runTool(t, cmd, "", append([]string{"--config", cfg}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "pebble store only") || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%v: error %v, want one line with %q", args, err, want)
		}
	}
	f(backupCmd, "pg_dump", dest)
	f(compactCmd, "VACUUM")
	f(compactCmd, "VACUUM", "--purge-expired")
	if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup made %s: %v", dest, err)
	}
}

// TestSyncPostgres: petrel sync downloads into and uploads from a
// postgres-backed local store.
func TestSyncPostgres(t *testing.T) {
	schema := pgSchema(t)
	pg := pgConfig(t, schema)
	common, remote, local := syncEvents("pg-common", 40, 1), syncEvents("pg-remote", 25, 1), syncEvents("pg-local", 15, 7)
	r := relaytest.Start(t, relaytest.Options{})
	saveAll(t, r.Store, common, remote)

	out, _, err := runTool(t, syncCmd, "", "--config", pg, "--quiet", r.URL)
	if err != nil || !strings.Contains(out, "negentropy: local 0, have 0, need 65") || !strings.Contains(out, "downloaded 65/65") {
		t.Fatalf("sync down into an empty postgres store: %v\n%s", err, out)
	}
	st := openPG(t, schema)
	saveAll(t, st, local)
	if n := countItems(t, st, `{}`); n != 80 {
		t.Fatalf("local store: %d events", n)
	}
	out, _, err = runTool(t, syncCmd, "", "--config", pg, "--quiet", "--dir", "both", r.URL)
	if err != nil || !strings.Contains(out, "have 15, need 0") || !strings.Contains(out, "uploaded 15/15") {
		t.Fatalf("sync up: %v\n%s", err, out)
	}
	if n := countItems(t, r.Store, `{"kinds":[7]}`); n != 15 {
		t.Fatalf("relay: %d kind-7 events after the upload", n)
	}
}
