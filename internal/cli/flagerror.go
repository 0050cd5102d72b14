package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError tells a flag value that does not parse as petrel's other
// input errors are told: the flag, the value and what it should be
// (`--kind: "abc" is not a whole number`), rather than pflag's `invalid
// argument "abc" for "-k, --kind" flag: strconv.ParseInt: parsing
// "abc": invalid syntax`. Other errors are returned as they are.
func flagError(_ *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	f := ive.GetFlag()
	name := "--" + f.Name
	value := ive.GetValue()
	typ := f.Value.Type()
	var ne *strconv.NumError
	switch {
	case typ == "bool":
		return fmt.Errorf("%s: %q is not true or false", name, value)
	case typ == "duration" || typ == "durationSlice":
		return fmt.Errorf("%s: %q is not a duration (like 300ms, 10s or 1m30s)", name, value)
	case errors.As(err, &ne):
		what := "a whole number"
		if strings.HasPrefix(typ, "float") {
			what = "a number"
		}
		if errors.Is(ne.Err, strconv.ErrRange) {
			return fmt.Errorf("%s: %q is out of range", name, ne.Num)
		}
		return fmt.Errorf("%s: %q is not %s", name, ne.Num, what)
	}
	return fmt.Errorf("%s: %q: %w", name, value, errors.Unwrap(err))
}
