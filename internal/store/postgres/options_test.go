package postgres

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The schema-name rule is what the regexp it replaced said; the length
// limit has its two tests (at it, just past it).
func TestValidSchemaName(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	cases := []string{
		"", "petrel", "_", "a", "A9", "9a", "_9", "a-b", "a b", "é", "petrel.x", "x\n",
		"Z_z_0", "schema$", strings.Repeat("a", MaxSchemaName), strings.Repeat("a", MaxSchemaName+1),
	}
	for c := 0; c < 256; c++ {
		cases = append(cases, string(rune(c)), "a"+string([]byte{byte(c)}), string([]byte{byte(c)}))
	}
	for _, s := range cases {
		if got, want := ValidSchemaName(s), re.MatchString(s); got != want {
			t.Errorf("ValidSchemaName(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

func TestValidSchemaNameAtLimit(t *testing.T) {
	if !ValidSchemaName("s" + strings.Repeat("0", MaxSchemaName-1)) {
		t.Fatalf("a %d-byte name is refused", MaxSchemaName)
	}
}

func TestValidSchemaNamePastLimit(t *testing.T) {
	if ValidSchemaName("s" + strings.Repeat("0", MaxSchemaName)) {
		t.Fatalf("a %d-byte name is accepted", MaxSchemaName+1)
	}
}

// TestOptionsCheck: Check refuses what Open refuses before connecting (no
// URL, a URL pgx cannot parse, a bad schema name), with ErrOptions, and
// takes the rest without connecting (nothing listens on port 1).
func TestOptionsCheck(t *testing.T) {
	for _, o := range []Options{
		{URL: "postgres://petrel@127.0.0.1:1/petrel"},
		{URL: "host=127.0.0.1 port=1 dbname=petrel", Schema: "s" + strings.Repeat("0", MaxSchemaName-1)},
	} {
		if err := o.Check(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, o := range []Options{
		{},
		{URL: "postgres://petrel@127.0.0.1:notaport/petrel"},
		{URL: "postgres://petrel@127.0.0.1/petrel", Schema: "bad-schema"},
	} {
		if err := o.Check(); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", o, err)
		}
	}
}

// TestOpenConnectErrorOneLine: a database that cannot be reached is told
// on one line, each distinct reason once (pgx gives each dial a line, and
// tries twice with sslmode=prefer), and errors.As still finds pgx's
// ConnectError.
func TestOpenConnectErrorOneLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, url := range []string{
		"postgres://petrel@127.0.0.1:1/petrel",                             // sslmode=prefer: two dials
		"postgres://petrel@127.0.0.1:1,127.0.0.1:2/petrel?sslmode=disable", // two hosts
	} {
		s, err := Open(ctx, Options{URL: url})
		if err == nil {
			s.Close()
			t.Fatalf("%s: opened", url)
		}
		msg := err.Error()
		var ce *pgconn.ConnectError
		if strings.Contains(msg, "\n") || !errors.As(err, &ce) || !strings.Contains(msg, "cannot connect as user=petrel database=petrel: 127.0.0.1:1") {
			t.Fatalf("%s: %q (ConnectError %v)", url, msg, ce != nil)
		}
		if strings.Count(msg, "127.0.0.1:1 (") != 1 {
			t.Fatalf("%s: a dial's reason told more than once: %q", url, msg)
		}
		if strings.Contains(url, ",") && !strings.Contains(msg, "; 127.0.0.1:2 (") {
			t.Fatalf("%s: the second host's reason is missing: %q", url, msg)
		}
	}
}
