package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestParseWhen(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := func(s string, want int64) {
		t.Helper()
		got, err := ParseWhen(s, now)
		if err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", s, got, err, want)
		}
	}
	f("now", now.Unix())
	f("1234", 1234)
	f("0", 0)
	f("2023-11-14T22:13:20Z", 1_700_000_000)
	f("30s", now.Unix()-30)
	f("15m", now.Unix()-900)
	f("2h", now.Unix()-7200)
	f("2d", now.Unix()-2*86400)
	f("1w", now.Unix()-7*86400)
	f("100y", 0) // clamped at the epoch
	bad := func(s string) {
		t.Helper()
		if _, err := ParseWhen(s, now); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	bad("")
	bad("yesterday")
	bad("-5")
	bad("5x")
	bad("9007199254740992") // MaxTimestamp+1
	bad("1969-12-31T23:59:59Z")
}

func TestRelayURL(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := RelayURL(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	f("relay.example", "wss://relay.example")
	f("relay.example/path", "wss://relay.example/path")
	f("ws://x.example", "ws://x.example")
	f("127.0.0.1:7447", "ws://127.0.0.1:7447")
	f("localhost:7447", "ws://localhost:7447")
	f("[::1]:7447", "ws://[::1]:7447")
}

func TestFilterFlags(t *testing.T) {
	pk := nostr.SecretKeyFromSeed([]byte("flags")).PubKey()
	var id nostr.ID
	id[3] = 9
	nevent, _ := nip19.EncodeEvent(nip19.EventPointer{ID: id, Relays: []string{"wss://r"}})
	naddr, _ := nip19.EncodeAddress(nip19.Address{Identifier: "x", PubKey: pk, Kind: 30023})
	f := func(args []string, want string) {
		t.Helper()
		var ff filterFlagSet
		cmd := &cobra.Command{}
		ff.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		got, err := ff.filter(cmd, time.Unix(1000, 0))
		if want == "" {
			if err == nil {
				t.Errorf("%v: accepted", args)
			}
			return
		}
		if err != nil {
			t.Errorf("%v: %v", args, err)
			return
		}
		if s := string(nostr.AppendFilter(nil, &got)); s != want {
			t.Errorf("%v:\n got %s\nwant %s", args, s, want)
		}
	}
	f([]string{"-k", "1,7", "-a", nip19.EncodePubKey(pk), "-l", "0"},
		`{"authors":["`+pk.Hex()+`"],"kinds":[1,7],"limit":0}`)
	f([]string{"-i", nevent, "-e", nip19.EncodeNote(id), "-p", pk.Hex(), "-t", "a=" + naddr, "-t", "t=x", "-t", "t=y", "-d", "z"},
		`{"ids":["`+id.Hex()+`"],"#a":["30023:`+pk.Hex()+`:x"],"#t":["x","y"],"#e":["`+id.Hex()+`"],"#p":["`+pk.Hex()+`"],"#d":["z"]}`)
	f([]string{"-s", "10m", "-u", "now", "--search", "q"}, `{"since":400,"until":1000,"search":"q"}`)
	f([]string{"-k", "70000"}, "")
	f([]string{"-t", "xy=1"}, "")
	f([]string{"-a", nip19.EncodeNote(id)}, "")
	f([]string{"-l", "-1"}, "")
	// A list flag given only "" ("$PK" unset) is refused, not dropped;
	// beside a value it adds nothing, as in pflag's lists.
	for _, flag := range []string{"-a", "-i", "-e", "-p", "--author", "--id"} {
		f([]string{flag, ""}, "")
	}
	f([]string{"-a", "", "-a", pk.Hex()}, `{"authors":["`+pk.Hex()+`"]}`)
	f([]string{"-d", ""}, `{"#d":[""]}`)
}

// Every client command is registered under the name it answers to.
func TestCommandNames(t *testing.T) {
	for name, add := range commands {
		if got := add().Name(); got != name {
			t.Errorf("registered as %q, named %q", name, got)
		}
	}
}

func TestInputLimits(t *testing.T) {
	// A line of maxInputLine bytes is read; one byte more is refused.
	at := strings.Repeat("x", maxInputLine) + "\n"
	n := 0
	if err := eachLine(strings.NewReader(at), func(l []byte) error { n = len(l); return nil }); err != nil || n != maxInputLine {
		t.Fatalf("at the limit: %d, %v", n, err)
	}
	over := strings.Repeat("x", maxInputLine+1)
	if err := eachLine(strings.NewReader(over), func([]byte) error { return nil }); !errors.Is(err, errInputTooLong) {
		t.Fatalf("past the limit: %v", err)
	}
	// Text read whole: maxTextInput bytes, then one more.
	if s, err := textArg(nil, strings.NewReader(strings.Repeat("y", maxTextInput))); err != nil || len(s) != maxTextInput {
		t.Fatalf("text at the limit: %d, %v", len(s), err)
	}
	if _, err := textArg(nil, strings.NewReader(strings.Repeat("y", maxTextInput+1))); !errors.Is(err, errInputTooLong) {
		t.Fatalf("text past the limit: %v", err)
	}
}

func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"now", "123", "2h", "2023-11-14T22:13:20Z", "9y", "-1", "1e5"} {
		f.Add(s)
	}
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseWhen(s, now)
		if err == nil && (v < 0 || v > nostr.MaxTimestamp) {
			t.Fatalf("%q: %d out of range", s, v)
		}
	})
}

// TestListValue: the list flags parse, print and describe themselves as
// pflag's StringSlice and StringArray flags do.
func TestListValue(t *testing.T) {
	uses := [][]string{
		nil,
		{"a"},
		{"a,b", "c"},
		{"", "x"},
		{"a,,b,", ","},
		{`"q,1",r`, `"x""y"`},
		{`s"t`},
		{"a b, c\td"},
		{"one\ntwo,three", "x\r\ny"},
		{`"unterminated`},
	}
	for _, args := range uses {
		ours, theirs := pflag.NewFlagSet("ours", pflag.ContinueOnError), pflag.NewFlagSet("theirs", pflag.ContinueOnError)
		var os1, oa1, ts1, ta1 []string
		listSliceVarP(ours, &os1, "slice", "s", "a `list` of things")
		listArrayVarP(ours, &oa1, "array", "a", "things, one a use")
		theirs.StringSliceVarP(&ts1, "slice", "s", nil, "a `list` of things")
		theirs.StringArrayVarP(&ta1, "array", "a", nil, "things, one a use")
		if o, w := ours.FlagUsages(), theirs.FlagUsages(); o != w {
			t.Fatalf("usage:\n%s\nwant\n%s", o, w)
		}
		var line []string
		for _, a := range args {
			line = append(line, "--slice="+a, "--array="+a)
		}
		oerr, terr := ours.Parse(line), theirs.Parse(line)
		if (oerr == nil) != (terr == nil) {
			t.Fatalf("%q: error %v, pflag's %v", args, oerr, terr)
		}
		if oerr != nil {
			continue
		}
		if !slices.Equal(os1, ts1) || !slices.Equal(oa1, ta1) || (os1 == nil) != (ts1 == nil) {
			t.Fatalf("%q: slice %q array %q; pflag's %q %q", args, os1, oa1, ts1, ta1)
		}
		for _, name := range []string{"slice", "array"} {
			o, w := ours.Lookup(name), theirs.Lookup(name)
			if o.Value.String() != w.Value.String() || o.Value.Type() != w.Value.Type() || o.Changed != w.Changed {
				t.Fatalf("%q --%s: %q %s %v; pflag's %q %s %v", args, name, o.Value.String(), o.Value.Type(), o.Changed, w.Value.String(), w.Value.Type(), w.Changed)
			}
		}
		if got, err := ours.GetStringSlice("slice"); err != nil || !slices.Equal(got, ts1) {
			t.Fatalf("%q: GetStringSlice %q, %v", args, got, err)
		}
	}
}
