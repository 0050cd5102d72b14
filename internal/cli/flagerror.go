package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/petrel-relay/petrel/internal/suggest"
)

// inputError names the flag or argument a value came from (or what
// failed) and says what is wrong with it, without the packages' own
// prefixes (`--author: not a public key ...`, not `--author: nip19: not
// a public key ...`); errors.Is and errors.As still find the cause.
type inputError struct {
	what string
	err  error
}

func (e *inputError) Error() string {
	if e.what == "" {
		return reason(e.err)
	}
	return e.what + ": " + reason(e.err)
}
func (e *inputError) Unwrap() error { return e.err }

func inputErr(what string, err error) error { return &inputError{what, err} }

// libPrefixes are the prefixes petrel's protocol packages start their
// errors with, as Go's own packages do ("nip44: invalid MAC").
var libPrefixes = []string{"nip13: ", "nip19: ", "nip44: ", "nip49: ", "nip59: ", "nostr: "}

// reason is err's text without the protocol packages' prefixes, at its
// start or after a colon: what a command's user reads. (nip19.Reason and
// nostr.Reason strip their own package's, for the relay's messages;
// every client command uses this one.)
func reason(err error) string {
	s := err.Error()
	for _, p := range libPrefixes {
		s = strings.TrimPrefix(s, p)
		s = strings.ReplaceAll(s, ": "+p, ": ")
	}
	return s
}

// flagError tells a flag value that does not parse as petrel's other
// input errors are told: the flag, the value and what it should be
// (`--kind: "abc" is not a whole number`), rather than pflag's `invalid
// argument "abc" for "-k, --kind" flag: strconv.ParseInt: parsing
// "abc": invalid syntax`. Other errors are returned as they are.
func flagError(cmd *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return unknownFlag(cmd, err)
	}
	f := ive.GetFlag()
	name := "--" + f.Name
	value := ive.GetValue()
	if errors.Is(err, errNotPositive) {
		return fmt.Errorf("%s: %q: must be more than zero", name, value)
	}
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

// unknownFlag adds to pflag's "unknown flag: --athor" the flag of cmd it
// probably meant; other errors are returned as they are.
func unknownFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok || cmd == nil {
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if best := suggest.Closest(name, names, 2); best != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, best)
	}
	return err
}

// errNotPositive is a positiveDuration flag's refusal of zero or less.
var errNotPositive = errors.New("not positive")

// positiveDuration is a time.Duration flag that refuses zero and negative
// values: a timeout of 0 would otherwise fail every request at once
// (where other tools take 0 for "no timeout").
type positiveDuration struct{ p *time.Duration }

func (d positiveDuration) String() string { return d.p.String() }
func (d positiveDuration) Type() string   { return "duration" }
func (d positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return errNotPositive
	}
	*d.p = v
	return nil
}

// timeoutVar registers --timeout on fs as a positive duration.
func timeoutVar(fs *pflag.FlagSet, p *time.Duration, def time.Duration, usage string) {
	*p = def
	fs.Var(positiveDuration{p}, "timeout", usage)
}
