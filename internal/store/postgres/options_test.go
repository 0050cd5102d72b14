package postgres

import (
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
