package postgres

import (
	"errors"
	"regexp"
	"strings"
	"testing"
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
