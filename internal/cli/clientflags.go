package cli

// This file holds what the client commands (req, count, event, key,
// encode, decode, encrypt, decrypt, gift, verify, fetch, relay, admin)
// share: the secret key flag, the filter flags, times, relay URLs, input
// read from arguments or stdin, and errors that name what failed.

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// SecretEnv is the environment variable a secret key is read from when
// --sec is not given.
const SecretEnv = "NOSTR_SECRET_KEY"

// errNoSecret is returned when a command needs a secret key and has none.
var errNoSecret = errors.New("no secret key: pass --sec (hex or nsec) or set " + SecretEnv)

// errPartial is returned when some relays (or inputs) failed after each
// was reported on its own line.
var errPartial = errors.New("not every relay succeeded (see above)")

// secretFlag is --sec.
type secretFlag struct{ sec string }

func (s *secretFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.sec, "sec", "", "secret key, hex or nsec (default $"+SecretEnv+")")
}

// key returns the secret key of --sec or $NOSTR_SECRET_KEY; an error
// names which of the two did not parse (a stale variable is easily
// forgotten when --sec is not on the command line).
func (s *secretFlag) key() (nostr.SecretKey, error) {
	v, from := s.sec, "--sec"
	if v == "" {
		v, from = os.Getenv(SecretEnv), SecretEnv
	}
	if v == "" {
		return nostr.SecretKey{}, errNoSecret
	}
	sk, err := nip19.ParseSecretKey(v)
	if err != nil {
		return sk, inputErr(from, err)
	}
	return sk, nil
}

// filterFlagSet are the filter flags of req, count and fetch.
type filterFlagSet struct {
	kinds   []int
	authors []string
	ids     []string
	tags    []string
	es, ps  []string
	ds      []string
	limit   int
	since   string
	until   string
	search  string
}

func (f *filterFlagSet) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntSliceVarP(&f.kinds, "kind", "k", nil, "kind (repeat or comma-separate for several)")
	listSliceVarP(fs, &f.authors, "author", "a", "author pubkey: hex, npub or nprofile (repeatable)")
	listSliceVarP(fs, &f.ids, "id", "i", "event id: hex, note or nevent (repeatable)")
	listArrayVarP(fs, &f.tags, "tag", "t", "tag condition name=value, name one letter (repeatable; one name's values are OR'ed)")
	listSliceVarP(fs, &f.es, "e", "e", "shortcut for -t e=<id> (hex, note or nevent)")
	listSliceVarP(fs, &f.ps, "p", "p", "shortcut for -t p=<pubkey> (hex, npub or nprofile)")
	listArrayVarP(fs, &f.ds, "d", "d", "shortcut for -t d=<identifier>")
	fs.IntVarP(&f.limit, "limit", "l", 0, "at most this many events (per relay; the total with --paginate)")
	fs.StringVarP(&f.since, "since", "s", "", "only events created at or after: unix time, now, RFC 3339, or an age like 30m, 1h, 2d, 1w")
	fs.StringVarP(&f.until, "until", "u", "", "only events created at or before (same forms as --since)")
	fs.StringVar(&f.search, "search", "", "NIP-50 full-text search")
}

// filter builds the filter the flags describe; cmd tells which flags were
// given (a given --limit 0 is a limit).
func (f *filterFlagSet) filter(cmd *cobra.Command, now time.Time) (nostr.Filter, error) {
	var out nostr.Filter
	// A list flag given only "" (-a "$PK" with PK unset) holds nothing,
	// as pflag's lists do, and would drop its condition: the whole feed
	// instead of one author's.
	for _, l := range []struct {
		flag string
		list []string
	}{{"--author", f.authors}, {"--id", f.ids}, {"-e", f.es}, {"-p", f.ps}} {
		if len(l.list) == 0 && cmd != nil && cmd.Flags().Changed(strings.TrimLeft(l.flag, "-")) {
			return out, fmt.Errorf("%s: no value given (\"\"): the filter would lose the condition", l.flag)
		}
	}
	if len(f.kinds) > 0 {
		for _, k := range f.kinds {
			if k < 0 || k > nostr.MaxKind {
				return out, fmt.Errorf("--kind %d: outside 0-%d", k, nostr.MaxKind)
			}
		}
		out.Kinds = f.kinds
	}
	for _, a := range f.authors {
		pk, err := nip19.ParsePubKey(a)
		if err != nil {
			return out, inputErr("--author", err)
		}
		out.Authors = append(out.Authors, pk)
	}
	for _, s := range f.ids {
		id, err := nip19.ParseID(s)
		if err != nil {
			return out, inputErr("--id", err)
		}
		out.IDs = append(out.IDs, id)
	}
	tagValues := map[byte][]string{}
	var order []byte
	add := func(name byte, v string) {
		if _, ok := tagValues[name]; !ok {
			order = append(order, name)
		}
		tagValues[name] = append(tagValues[name], v)
	}
	for _, t := range f.tags {
		name, v, ok := strings.Cut(t, "=")
		if !ok || len(name) != 1 {
			return out, fmt.Errorf("--tag %s: want name=value with a one-letter name", nip19.Shown(t))
		}
		v, err := tagValue(name[0], v)
		if err != nil {
			// The value is shown by the error, unless it may be a secret.
			return out, inputErr("--tag "+name, err)
		}
		add(name[0], v)
	}
	for _, e := range f.es {
		id, err := nip19.ParseID(e)
		if err != nil {
			return out, inputErr("-e", err)
		}
		add('e', id.Hex())
	}
	for _, p := range f.ps {
		pk, err := nip19.ParsePubKey(p)
		if err != nil {
			return out, inputErr("-p", err)
		}
		add('p', pk.Hex())
	}
	for _, d := range f.ds {
		add('d', d)
	}
	for _, name := range order {
		out.Tags = append(out.Tags, nostr.TagFilter{Name: name, Values: tagValues[name]})
	}
	if cmd.Flags().Changed("limit") {
		if f.limit < 0 {
			return out, fmt.Errorf("--limit %d: must not be negative", f.limit)
		}
		out.Limit, out.HasLimit = f.limit, true
	}
	if f.since != "" {
		t, err := ParseWhen(f.since, now)
		if err != nil {
			return out, fmt.Errorf("--since: %w", err)
		}
		out.Since, out.HasSince = t, true
	}
	if f.until != "" {
		t, err := ParseWhen(f.until, now)
		if err != nil {
			return out, fmt.Errorf("--until: %w", err)
		}
		out.Until, out.HasUntil = t, true
	}
	out.Search = f.search
	return out, nil
}

// tagValue converts the bech32 forms people paste into what an e, p or a
// tag holds.
func tagValue(name byte, v string) (string, error) {
	switch name {
	case 'e':
		id, err := nip19.ParseID(v)
		if err != nil {
			return "", err
		}
		return id.Hex(), nil
	case 'p':
		pk, err := nip19.ParsePubKey(v)
		if err != nil {
			return "", err
		}
		return pk.Hex(), nil
	case 'a':
		if strings.HasPrefix(strings.ToLower(v), nip19.PrefixAddress+"1") {
			e, err := nip19.Decode(v)
			if err != nil {
				return "", err
			}
			return e.Address.Coordinate(), nil
		}
	}
	return v, nil
}

// ParseWhen reads a time: "now", unix seconds, RFC 3339, or an age
// (30s, 15m, 1h, 2d, 1w, 1y) counted back from now.
func ParseWhen(s string, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "now" {
		return now.Unix(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > nostr.MaxTimestamp {
			return 0, fmt.Errorf("%q: outside 0-%d", s, int64(nostr.MaxTimestamp))
		}
		return n, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if t.Unix() < 0 || t.Unix() > nostr.MaxTimestamp {
			return 0, fmt.Errorf("%q: before 1970 or past %d", s, int64(nostr.MaxTimestamp))
		}
		return t.Unix(), nil
	}
	if len(s) >= 2 {
		n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		unit := map[byte]int64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400, 'y': 365 * 86400}[s[len(s)-1]]
		if err == nil && unit > 0 && n >= 0 && n <= nostr.MaxTimestamp/unit {
			return max(now.Unix()-n*unit, 0), nil
		}
	}
	return 0, fmt.Errorf("%q: want now, unix seconds, RFC 3339 or an age like 2h", s)
}

// RelayURL completes what a person types for a relay: "relay.example"
// becomes wss://relay.example, a loopback host:port ws://.
func RelayURL(s string) string {
	if strings.Contains(s, "://") {
		return s
	}
	host := s
	if i := strings.IndexAny(host, "/"); i >= 0 {
		host = host[:i]
	}
	h := host
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	if nostr.IsLoopbackHost(strings.Trim(h, "[]")) || h == "localhost" {
		return "ws://" + s
	}
	return "wss://" + s
}

// Input bounds of the client commands.
const (
	// maxInputLine is the longest stdin line (an event, a wrap, a code).
	maxInputLine = 16 << 20
	// maxTextInput is the most a text read whole from stdin may hold
	// (encrypt's plaintext, decrypt's payload, a rumor).
	maxTextInput = 1 << 20
)

// errInputTooLong is wrapped when stdin passes maxInputLine or
// maxTextInput.
var errInputTooLong = errors.New("stdin input too long")

// inputs returns args, or when there are none the non-empty lines of
// stdin (what encode, decode and key public read).
func inputs(args []string, stdin io.Reader) ([]string, error) {
	if len(args) > 0 {
		return args, nil
	}
	var out []string
	err := eachLine(stdin, func(line []byte) error {
		out = append(out, strings.TrimSpace(string(line)))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("nothing to read: give arguments or lines on stdin")
	}
	return out, nil
}

// stdinPiped reports whether stdin is a pipe or a file (not a terminal
// or /dev/null), so a command may read an event from it.
func stdinPiped(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok {
		return stdin != nil
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice == 0
}

// UTF8BOM is the byte order mark some editors and Windows tools write at
// the start of a UTF-8 file. It is not part of the first line's JSON or
// code: the line readers (eachLine here, cmd/petrel's import input)
// drop it.
const UTF8BOM = "\ufeff"

// eachLine calls fn for every non-blank line of r (lines up to
// maxInputLine bytes, without the newline and without a byte order mark
// before the first).
func eachLine(r io.Reader, fn func(line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxInputLine+1) // +1: the scanner's limit counts the newline
	first := true
	for sc.Scan() {
		l := sc.Bytes()
		if first {
			l, first = bytes.TrimPrefix(l, []byte(UTF8BOM)), false
		}
		if len(l) > maxInputLine {
			return fmt.Errorf("%w: a line of more than %d bytes", errInputTooLong, maxInputLine)
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("%w: a line of more than %d bytes", errInputTooLong, maxInputLine)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return nil
}

// listValue is the value of a repeatable string flag: pflag's
// StringSlice (split is set: each use may hold several items, separated
// by commas as in a CSV record) or StringArray (each use is one item),
// with their type names, parsing and texts, but without their CSV
// machinery where it is not needed. pflag renders every flag's default
// at registration, which for its list types is a CSV writer with a 4 KiB
// buffer, and StringSlice reads every use through a CSV reader with
// another: fresh memory, a page fault each, in a command that lives a few
// milliseconds (req registers six such flags; -a given 50 times was 50
// more faults). TestListValue checks it against pflag's.
type listValue struct {
	p       *[]string
	split   bool
	changed bool
}

// listSliceVarP and listArrayVarP are fs.StringSliceVarP and
// fs.StringArrayVarP with an empty default, on a listValue. The default
// text is blank so that help shows no default, as for pflag's own list
// flags (pflag knows their empty default, "[]", only for its own types).
func listSliceVarP(fs *pflag.FlagSet, p *[]string, name, short, usage string) {
	fs.VarPF(&listValue{p: p, split: true}, name, short, usage).DefValue = ""
}

func listArrayVarP(fs *pflag.FlagSet, p *[]string, name, short, usage string) {
	fs.VarPF(&listValue{p: p}, name, short, usage).DefValue = ""
}

func (v *listValue) Set(s string) error {
	var items []string
	switch {
	case !v.split:
		items = []string{s}
	case s == "":
		items = []string{}
	case strings.ContainsAny(s, "\"\r\n"):
		// Quotes or line ends: a CSV record, as pflag reads it.
		r, err := csv.NewReader(strings.NewReader(s)).Read()
		if err != nil {
			return err
		}
		items = r
	default:
		items = strings.Split(s, ",")
	}
	if !v.changed {
		*v.p = items
		v.changed = true
	} else {
		*v.p = append(*v.p, items...)
	}
	return nil
}

func (v *listValue) Type() string {
	if v.split {
		return "stringSlice"
	}
	return "stringArray"
}

func (v *listValue) String() string {
	if len(*v.p) == 0 {
		return "[]"
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(*v.p)
	w.Flush()
	return "[" + strings.TrimSuffix(b.String(), "\n") + "]"
}

// Append, Replace and GetSlice make it a pflag.SliceValue, as pflag's
// list values are.
func (v *listValue) Append(s string) error {
	*v.p = append(*v.p, s)
	return nil
}

func (v *listValue) Replace(items []string) error {
	*v.p = items
	return nil
}

func (v *listValue) GetSlice() []string { return *v.p }
