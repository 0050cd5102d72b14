package main

// The client commands, run as the real binary against real relays (the
// same binary's serve, in its own process: see startServe) and real
// stores.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

var (
	clientBinOnce sync.Once
	clientBin     string
	clientBinErr  error
	// reflectMethodFuncs lists the functions the linker marked
	// <ReflectMethod> in that build (TestNoReflectMethodLookup);
	// linkerGraph says it printed its dependency graph at all.
	reflectMethodFuncs []string
	linkerGraph        bool
)

// petrelBin builds the binary once for the tests that run it. The link
// also prints the linker's dependency graph (-dumpdep), read here for
// TestNoReflectMethodLookup, so that the package links petrel once.
func petrelBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	clientBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "petrel-client-test")
		if err != nil {
			clientBinErr = err
			return
		}
		clientBin = filepath.Join(dir, "petrel")
		var deps bytes.Buffer
		cmd := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", clientBin, ".")
		cmd.Stdout, cmd.Stderr = &deps, &deps
		if err := cmd.Run(); err != nil {
			clientBinErr = fmt.Errorf("go build: %v\n%.4000s", err, deps.String())
			return
		}
		found := map[string]bool{}
		for line := range strings.Lines(deps.String()) {
			from, _, ok := strings.Cut(line, " -> ")
			if !ok {
				continue
			}
			linkerGraph = linkerGraph || strings.HasPrefix(from, "main.main")
			if name, marked := strings.CutSuffix(from, " <ReflectMethod>"); marked {
				found[name] = true
			}
		}
		reflectMethodFuncs = slices.Sorted(maps.Keys(found))
	})
	if clientBinErr != nil {
		t.Fatal(clientBinErr)
	}
	return clientBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if clientBin != "" {
		os.RemoveAll(filepath.Dir(clientBin))
	}
	os.Exit(code)
}

// cliBin runs the binary with stdin and returns stdout, stderr and whether
// it exited 0.
type cliBin struct {
	t   *testing.T
	bin string
	env []string
}

func newCLI(t *testing.T) *cliBin {
	return &cliBin{t: t, bin: petrelBin(t), env: append(os.Environ(), "PETREL_CONFIG=", cli.SecretEnv+"=")}
}

func (c *cliBin) run(stdin string, args ...string) (stdout, stderr string, ok bool) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			c.t.Fatalf("%v: %v", args, err)
		}
	}
	return out.String(), errb.String(), err == nil
}

// must runs and fails the test unless the command succeeds.
func (c *cliBin) must(stdin string, args ...string) string {
	c.t.Helper()
	out, errOut, ok := c.run(stdin, args...)
	if !ok {
		c.t.Fatalf("%v failed:\n%s%s", args, out, errOut)
	}
	return out
}

// fails runs and fails the test unless the command exits non-zero with
// one stderr line containing want.
func (c *cliBin) fails(want string, stdin string, args ...string) string {
	c.t.Helper()
	out, errOut, ok := c.run(stdin, args...)
	if ok || !strings.Contains(errOut, want) {
		c.t.Fatalf("%v: ok=%v, want an error containing %q:\n%s%s", args, ok, want, out, errOut)
	}
	return errOut
}

// cpuTicks is the user and system CPU time of process pid so far, in
// clock ticks (/proc/PID/stat), or 0 if it cannot be read.
func cpuTicks(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestClientOffline(t *testing.T) {
	c := newCLI(t)
	sk := strings.TrimSpace(c.must("", "key", "generate"))
	if _, err := nostr.ParseSecretKey(sk); err != nil {
		t.Fatalf("key generate: %q", sk)
	}
	parsed, _ := nostr.ParseSecretKey(sk)
	pk := strings.TrimSpace(c.must("", "key", "public", sk))
	if pk != parsed.PubKey().Hex() {
		t.Fatalf("key public: %s", pk)
	}
	nsec := nip19.EncodeSecretKey(parsed)
	if got := strings.TrimSpace(c.must(nsec+"\n", "key", "public")); got != pk {
		t.Fatalf("key public of an nsec on stdin: %s", got)
	}

	// encode/decode, every form, both ways.
	npub := strings.TrimSpace(c.must("", "encode", "npub", pk))
	if got := strings.TrimSpace(c.must("", "decode", npub)); got != pk {
		t.Fatalf("decode npub: %s", got)
	}
	if got := strings.TrimSpace(c.must("", "encode", "nsec", sk)); got != nsec {
		t.Fatalf("encode nsec: %s", got)
	}
	if got := strings.TrimSpace(c.must("", "decode", "nostr:"+nsec)); got != sk {
		t.Fatalf("decode nsec: %s", got)
	}
	id := strings.Repeat("ab", 32)
	note := strings.TrimSpace(c.must("", "encode", "note", id))
	if got := strings.TrimSpace(c.must("", "decode", note)); got != id {
		t.Fatalf("decode note: %s", got)
	}
	nprofile := strings.TrimSpace(c.must("", "encode", "nprofile", npub, "--relay", "wss://a.example", "--relay", "wss://b.example"))
	if got := c.must("", "decode", nprofile); got != `{"pubkey":"`+pk+`","relays":["wss://a.example","wss://b.example"]}`+"\n" {
		t.Fatalf("decode nprofile: %s", got)
	}
	nevent := strings.TrimSpace(c.must("", "encode", "nevent", note, "--relay", "wss://r.example", "--author", npub, "--kind", "30023"))
	if got := c.must("", "decode", nevent); got != `{"id":"`+id+`","relays":["wss://r.example"],"author":"`+pk+`","kind":30023}`+"\n" {
		t.Fatalf("decode nevent: %s", got)
	}
	bare := strings.TrimSpace(c.must("", "encode", "nevent", id))
	if got := c.must("", "decode", bare); got != `{"id":"`+id+`","relays":[]}`+"\n" {
		t.Fatalf("decode bare nevent: %s", got)
	}
	naddr := strings.TrimSpace(c.must("", "encode", "naddr", "--pubkey", pk, "--kind", "30023", "--identifier", "post <1>"))
	if got := c.must("", "decode", naddr); got != `{"identifier":"post <1>","pubkey":"`+pk+`","kind":30023,"relays":[]}`+"\n" {
		t.Fatalf("decode naddr: %s", got)
	}
	// A hint without a scheme is completed as a relay argument is, so
	// that the code carries URLs a client can dial; what is not a relay
	// URL is refused.
	hinted := strings.TrimSpace(c.must("", "encode", "naddr", "-p", pk, "-k", "30023", "-d", "x", "-r", "relay.example", "-r", "127.0.0.1:7447"))
	if got := c.must("", "decode", hinted); got != `{"identifier":"x","pubkey":"`+pk+`","kind":30023,"relays":["wss://relay.example","ws://127.0.0.1:7447"]}`+"\n" {
		t.Fatalf("decode naddr with hints: %s", got)
	}
	for _, kind := range []string{"nprofile", "nevent"} {
		c.fails(`--relay: "http://relay.example": not a relay: give host[:port] or a ws:// or wss:// URL`, "", "encode", kind, pk, "-r", "http://relay.example")
	}
	// Many at once on stdin, one per line.
	if got := lines(c.must(npub+"\n\n"+note+"\n", "decode")); !slices.Equal(got, []string{pk, id}) {
		t.Fatalf("decode from stdin: %q", got)
	}
	if got := lines(c.must(pk+"\n"+pk+"\n", "encode", "npub")); len(got) != 2 || got[0] != npub {
		t.Fatalf("encode from stdin: %q", got)
	}
	// A byte order mark before the first line is not part of it.
	if got := lines(c.must("\ufeff"+npub+"\r\n"+note+"\r\n", "decode")); !slices.Equal(got, []string{pk, id}) {
		t.Fatalf("decode from stdin after a byte order mark: %q", got)
	}
	// Errors: one line, status 1.
	// (The last character changed, to one it is not: the key is random.)
	last := "x"
	if strings.HasSuffix(npub, last) {
		last = "q"
	}
	typo := npub[:len(npub)-1] + last
	errOut := c.fails("not a valid bech32 string", "", "decode", typo)
	if errOut != `petrel: "`+typo+`": not a valid bech32 string: the checksum does not match: a character is mistyped, missing or extra`+"\n" {
		t.Fatalf("a bad bech32 string: %q", errOut)
	}
	// Of several, the one that failed is named, after the others' output;
	// a mistyped nsec is not shown.
	if out, errOut, ok := c.run("", "decode", npub, "extra-junk"); ok || out != pk+"\n" || errOut != `petrel: "extra-junk": not a valid bech32 string: no "1" between a prefix and the data`+"\n" {
		t.Fatalf("decode npub extra-junk: ok=%v\nstdout %q\nstderr %q", ok, out, errOut)
	}
	badNsec := nsec[:len(nsec)-1] + map[bool]string{true: "q", false: "x"}[strings.HasSuffix(nsec, "x")]
	if errOut := c.fails("an nsec: not a valid bech32 string: the checksum does not match", "", "decode", badNsec); strings.Contains(errOut, badNsec[:12]) {
		t.Fatalf("a mistyped nsec was shown: %q", errOut)
	}
	// An nsec given in a tag, by mistake, is not shown either (nor a
	// whole --tag argument that starts like one).
	for _, args := range [][]string{
		{"req", "-t", "p=" + nsec, "ws://127.0.0.1:1"},
		{"event", "--sec", sk, "-c", "x", "-t", "p=" + nsec},
		{"req", "-t", nsec, "ws://127.0.0.1:1"},
		{"event", "--sec", sk, "-c", "x", "-t", nsec},
	} {
		if _, errOut, ok := c.run("", args...); ok || strings.Contains(errOut, nsec[5:]) || !strings.Contains(errOut, "--tag ") {
			t.Fatalf("%v: ok=%v, stderr %q", args[:3], ok, errOut)
		}
	}
	if errOut := c.fails("--tag p: not a public key", "", "req", "-t", "p=zz", "ws://127.0.0.1:1"); !strings.Contains(errOut, `"zz"`) {
		t.Fatalf("a bad p tag's value is not shown: %q", errOut)
	}
	c.fails("not a public key", "", "encode", "npub", note)
	c.fails("not a secret key", "", "key", "public", strings.Repeat("0", 64))
	// Of several, the one that does not parse is told by its place (a
	// secret is not quoted), and the ones before it are printed.
	if out, errOut, ok := c.run("", "key", "public", sk, "zz", sk); ok || out != pk+"\n" || !strings.HasPrefix(errOut, "petrel: secret key 2 of 3: not a secret key") {
		t.Fatalf("key public with a bad second key: ok=%v, out %q, stderr %q", ok, out, errOut)
	}
	if errOut := c.fails("--author: not a public key", "", "req", "--author", "npub1xyz", "ws://127.0.0.1:1"); strings.Contains(errOut, "nip19:") {
		t.Fatalf("the package's prefix mid-line: %q", errOut)
	}
	if errOut := c.fails("-p: not a public key", "", "event", "--sec", sk, "-c", "x", "-p", "zz"); strings.Contains(errOut, "nip19:") {
		t.Fatalf("event -p: the package's prefix mid-line: %q", errOut)
	}
	// A secret key that does not parse is told by where it came from.
	staleEnv := *c
	staleEnv.env = append(slices.Clip(c.env), cli.SecretEnv+"=abc")
	if errOut := staleEnv.fails("not a secret key", "", "event", "-c", "x"); !strings.HasPrefix(errOut, "petrel: "+cli.SecretEnv+": not a secret key") {
		t.Fatalf("a bad $%s: %q", cli.SecretEnv, errOut)
	}
	if errOut := staleEnv.fails("not a secret key", "", "event", "-c", "x", "--sec", "abcd"); !strings.HasPrefix(errOut, "petrel: --sec: not a secret key") {
		t.Fatalf("a bad --sec: %q", errOut)
	}
	// A subcommand that does not exist fails (cobra prints the group's
	// help and exits 0); the group alone still prints its help.
	for _, group := range []string{"key", "gift", "encode", "bench"} {
		if out, errOut, ok := c.run("", group, "nosuch"); ok || out != "" || errOut != `petrel: unknown command "nosuch" for "petrel `+group+`"`+"\n" {
			t.Fatalf("%s nosuch: ok=%v\nstdout %q\nstderr %q", group, ok, out, errOut)
		}
	}
	// A mistyped command or flag is told on one line with what was
	// probably meant (cobra's own root complaint took three lines).
	for args, want := range map[string]string{
		"reqq":             `petrel: unknown command "reqq" for "petrel" (did you mean req?)` + "\n",
		"srve":             `petrel: unknown command "srve" for "petrel" (did you mean serve?)` + "\n",
		"nosuch":           `petrel: unknown command "nosuch" for "petrel"` + "\n",
		"key pubilc x":     `petrel: unknown command "pubilc" for "petrel key" (did you mean public?)` + "\n",
		"req --athor x":    "petrel: unknown flag: --athor (did you mean --author?)\n",
		"serve --dta x":    "petrel: unknown flag: --dta (did you mean --data?)\n",
		"req --zzzzzzzzzz": "petrel: unknown flag: --zzzzzzzzzz\n",
	} {
		if out, errOut, ok := c.run("", strings.Fields(args)...); ok || out != "" || errOut != want {
			t.Fatalf("%s: ok=%v, stdout %q, stderr %q, want %q", args, ok, out, errOut, want)
		}
	}
	// Too few or too many arguments: cobra's count, and the usage line
	// that says which command and what it takes (one line).
	for args, want := range map[string]string{
		"relay":            "petrel: accepts 1 arg(s), received 0; usage: petrel relay URL [flags]\n",
		"key encrypt":      "petrel: accepts between 1 and 2 arg(s), received 0; usage: petrel key encrypt SECRET [PASSWORD] [flags]\n",
		"backup /tmp/a /b": "petrel: accepts 1 arg(s), received 2; usage: petrel backup <dest-dir> [flags]\n",
	} {
		if _, errOut, ok := c.run("", strings.Fields(args)...); ok || errOut != want {
			t.Fatalf("%s: ok=%v, stderr %q, want %q", args, ok, errOut, want)
		}
	}
	if out := c.must("", "key"); !strings.Contains(out, "Usage:") {
		t.Fatalf("key alone: %q", out)
	}
	// A flag value that does not parse: the flag, the value, what it
	// should be; not pflag's and strconv's words.
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`--kind: "abc" is not a whole number`, []string{"req", "-k", "1,abc", "ws://127.0.0.1:1"}},
		{`--kind: "abc" is not a whole number`, []string{"encode", "nevent", id, "-k", "abc"}},
		{`--limit: "99999999999999999999" is out of range`, []string{"req", "-l", "99999999999999999999", "ws://127.0.0.1:1"}},
		{`--timeout: "soon" is not a duration (like 300ms, 10s or 1m30s)`, []string{"relay", "--timeout", "soon", "ws://127.0.0.1:1"}},
		{`--paginate: "maybe" is not true or false`, []string{"req", "--paginate=maybe", "ws://127.0.0.1:1"}},
		{`--timeout: "0": must be more than zero`, []string{"req", "--timeout", "0", "ws://127.0.0.1:1"}},
		{`--pow -1: want 0 to 64 leading zero bits`, []string{"event", "--sec", sk, "-c", "x", "--pow", "-1"}},
		{`--pow 65: want 0 to 64 leading zero bits`, []string{"event", "--sec", sk, "-c", "x", "--pow", "65"}},
		{`--author: "\"abc": parse error on line 1, column 5: extraneous or missing " in quoted-field`, []string{"req", "-a", `"abc`, "ws://127.0.0.1:1"}},
	} {
		if out, errOut, ok := c.run("", tc.args...); ok || out != "" || errOut != "petrel: "+tc.want+"\n" {
			t.Fatalf("%v: ok=%v\nstdout %q\nstderr %q\nwant   %q", tc.args, ok, out, errOut, "petrel: "+tc.want+"\n")
		}
	}

	// NIP-49.
	ncs := strings.TrimSpace(c.must("", "key", "encrypt", sk, "pässword", "--log-n", "4"))
	if got := strings.TrimSpace(c.must("", "key", "decrypt", ncs, "pässword")); got != sk {
		t.Fatalf("key decrypt: %s", got)
	}
	if got := strings.TrimSpace(c.must("pässword\n", "key", "decrypt", ncs)); got != sk {
		t.Fatalf("key decrypt, password on stdin: %s", got)
	}
	// Errors read without the packages' prefixes, and say what failed.
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"wrong password (or a corrupted ncryptsec)", []string{"key", "decrypt", ncs, "other"}},
		{"--log-n 23: want 1 to 22", []string{"key", "encrypt", sk, "x", "--log-n", "23"}},
		{"--log-n 0: want 1 to 22", []string{"key", "encrypt", sk, "x", "--log-n", "0"}},
		{"cannot decrypt: malformed payload: invalid payload length: 6", []string{"decrypt", "--sec", sk, "-p", pk, "AgAAAA"}},
		{"cannot encrypt: plaintext must be 1 to 65535 bytes: 0 bytes", []string{"encrypt", "--sec", sk, "-p", pk, ""}},
		{`not an event id (64 hex characters, note or nevent): "zz": not a valid bech32 string: 2 characters, too short to be one`, []string{"encode", "note", "zz"}},
		{`not a valid rumor: "kind" missing or outside 0-65535`, []string{"gift", "wrap", "--sec", sk, "-p", pk, `{"content":"x"}`}},
		{"no rumor: give the unsigned event as JSON, as an argument or on stdin", []string{"gift", "wrap", "--sec", sk, "-p", pk}},
	} {
		if out, errOut, ok := c.run("", tc.args...); ok || out != "" || errOut != "petrel: "+tc.want+"\n" {
			t.Fatalf("%v: ok=%v\nstdout %q\nstderr %q\nwant   %q", tc.args, ok, out, errOut, "petrel: "+tc.want+"\n")
		}
	}
	// An empty password (an unset variable, most often) is refused, as an
	// argument or a blank line; one character is enough.
	c.fails("empty password", "", "key", "encrypt", sk, "", "--log-n", "4")
	c.fails("empty password", "\n", "key", "encrypt", sk, "--log-n", "4")
	// --log-n at its low limit is taken (the high one, 22, takes 4 GiB
	// of scrypt memory: only its neighbour 23 is tried, above).
	if got := strings.TrimSpace(c.must("pw\n", "key", "decrypt", strings.TrimSpace(c.must("", "key", "encrypt", sk, "pw", "--log-n", "1")))); got != sk {
		t.Fatalf("key encrypt --log-n 1: decrypts to %s", got)
	}
	ncs = strings.TrimSpace(c.must("", "key", "encrypt", sk, "x", "--log-n", "4"))
	if got := strings.TrimSpace(c.must("", "key", "decrypt", ncs, "x")); got != sk {
		t.Fatalf("key decrypt of a one-character password: %s", got)
	}

	// NIP-44 and NIP-04, both ways.
	bob := nostr.SecretKeyFromSeed([]byte("cli-bob"))
	payload := strings.TrimSpace(c.must("", "encrypt", "--sec", nsec, "-p", nip19.EncodePubKey(bob.PubKey()), "hello, bob"))
	if got := c.must("", "decrypt", "--sec", bob.Hex(), "-p", pk, payload); got != "hello, bob\n" {
		t.Fatalf("decrypt: %q", got)
	}
	c.fails("cannot decrypt (not encrypted between these two keys, or altered): invalid MAC", "", "decrypt", "--sec", sk, "-p", pk, payload)
	legacy := strings.TrimSpace(c.must("from stdin\n", "encrypt", "--nip04", "--sec", sk, "-p", bob.PubKey().Hex()))
	if !strings.Contains(legacy, "?iv=") {
		t.Fatalf("nip04 payload %q", legacy)
	}
	if got := c.must(legacy, "decrypt", "--nip04", "--sec", bob.Hex(), "-p", pk); got != "from stdin\n" {
		t.Fatalf("nip04 decrypt: %q", got)
	}
	c.fails("no secret key", "", "encrypt", "-p", pk, "x")

	// Gift wrap and unwrap (NIP-59/17), and verify.
	wraps := c.must(`{"kind":14,"content":"secret","tags":[["p","`+bob.PubKey().Hex()+`"]]}`,
		"gift", "wrap", "--sec", sk, "-p", bob.PubKey().Hex(), "--self")
	if len(lines(wraps)) != 2 {
		t.Fatalf("gift wrap --self: %q", wraps)
	}
	rumor := c.must(lines(wraps)[0], "gift", "unwrap", "--sec", bob.Hex())
	var r struct {
		PubKey  string `json:"pubkey"`
		Kind    int    `json:"kind"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal([]byte(rumor), &r); err != nil || r.PubKey != pk || r.Kind != 14 || r.Content != "secret" {
		t.Fatalf("unwrap: %q %v", rumor, err)
	}
	if got := c.must(lines(wraps)[1], "gift", "unwrap", "--sec", sk); got != rumor {
		t.Fatalf("the sender's copy: %q", got)
	}
	c.fails("open the wrap", lines(wraps)[0], "gift", "unwrap", "--sec", sk)
	c.must(wraps, "verify")
	bad := strings.Replace(lines(wraps)[0], `"kind":1059`, `"kind":1060`, 1)
	errOut = c.fails("1 of 2 events invalid", bad+"\n"+lines(wraps)[1], "verify")
	if !strings.Contains(errOut, "line 1:") || !strings.Contains(errOut, "not the hash") {
		t.Fatalf("verify output: %s", errOut)
	}
	// What does not parse is told without the parser's package prefix.
	if errOut := c.fails("1 of 1 events invalid", "[1]\n", "verify"); !strings.HasPrefix(errOut, "line 1: not an event: event must be a JSON object\n") {
		t.Fatalf("verify of a non-event: %q", errOut)
	}
	if errOut := c.fails("not an event", `{"id":1}`, "gift", "unwrap", "--sec", sk); errOut != "petrel: line 1: not an event: id must be a string\n" {
		t.Fatalf("unwrap of a non-event: %q", errOut)
	}

	// Without relays, event prints the signed event and req the filter.
	ev := c.must("", "event", "--sec", nsec, "-k", "7", "-c", "+", "-e", note, "-t", "x=a;b")
	parsedEv, err := nostr.ParseEvent([]byte(strings.TrimSpace(ev)), nil)
	if err != nil || parsedEv.Kind != 7 || parsedEv.PubKey.Hex() != pk || !nostr.CheckID(parsedEv) {
		t.Fatalf("event: %s %v", ev, err)
	}
	if !slices.EqualFunc(parsedEv.Tags, nostr.Tags{{"x", "a", "b"}, {"e", id}}, func(a, b nostr.Tag) bool { return slices.Equal(a, b) }) {
		t.Fatalf("tags %v", parsedEv.Tags)
	}
	// -t - marks a NIP-70 protected event; another name alone is refused.
	prot, err := nostr.ParseEvent([]byte(strings.TrimSpace(c.must("", "event", "--sec", sk, "-c", "p", "-t", "-", "-t", "t=x"))), nil)
	if err != nil || !slices.EqualFunc(prot.Tags, nostr.Tags{{"-"}, {"t", "x"}}, func(a, b nostr.Tag) bool { return slices.Equal(a, b) }) {
		t.Fatalf("event -t -: %v %v", prot, err)
	}
	c.fails(`--tag "x": want name=value[;value...] (or -t - for NIP-70)`, "", "event", "--sec", sk, "-c", "p", "-t", "x")
	if got := c.must("", "req", "-k", "1", "-k", "7", "-a", npub, "-l", "3", "-t", "t=x"); got != `{"authors":["`+pk+`"],"kinds":[1,7],"#t":["x"],"limit":3}`+"\n" {
		t.Fatalf("req without relays: %s", got)
	}
	// Mined.
	mined := c.must("", "event", "--sec", sk, "-c", "work", "--pow", "10")
	pe, _ := nostr.ParseEvent([]byte(strings.TrimSpace(mined)), nil)
	if pe == nil || pe.ID[0] != 0 || pe.ID[1]&0xc0 != 0 {
		t.Fatalf("--pow 10: %s", mined)
	}
	// Mining that is interrupted says so (not "context canceled"), and
	// nothing is printed. 64 bits, the most --pow takes: accepted (65 is
	// refused above), so mining starts.
	mining := exec.Command(c.bin, "event", "--sec", sk, "-c", "work", "--pow", "64")
	mining.Env = c.env
	var minedOut, minedErr strings.Builder
	mining.Stdout, mining.Stderr = &minedOut, &minedErr
	if err := mining.Start(); err != nil {
		t.Fatal(err)
	}
	// Past start-up once it has used 0.2 s of CPU: mining, with the
	// signal caught.
	for deadline := time.Now().Add(30 * time.Second); cpuTicks(mining.Process.Pid) < 20 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if err := mining.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := mining.Wait(); mining.ProcessState.ExitCode() != 1 || minedOut.Len() != 0 || minedErr.String() != "petrel: --pow 64: interrupted before a nonce was found\n" {
		t.Fatalf("interrupted mining: %v, stdout %q, stderr %q", err, minedOut.String(), minedErr.String())
	}
	// A template that is not one: told in the template's terms (not
	// encoding/json's Go types), and nothing a relay would refuse signed.
	for in, want := range map[string]string{
		`{"kind":"1"}`:                    `stdin line 1: not a JSON event: "kind" must be a whole number, not a JSON string`,
		`{"tags":[["a",{}]]}`:             `stdin line 1: not a JSON event: "tags" must be an array of arrays of strings, not a JSON object`,
		`[1,2]`:                           `stdin line 1: not a JSON event: want an object, not a JSON array`,
		`{"created_at":-1}`:               `stdin line 1: created_at -1: outside 0-9007199254740991`,
		`{"created_at":9007199254740992}`: `stdin line 1: created_at 9007199254740992: outside 0-9007199254740991`,
		`{"created_at":9007199254740991}`: "", // the limits, accepted
		`{"created_at":1}`:                "",
		`{"kind":1,"content":"x"}`:        "",
	} {
		out, errOut, ok := c.run(in+"\n", "event", "--sec", sk)
		if want == "" {
			if !ok || len(lines(out)) != 1 {
				t.Fatalf("template %s: ok=%v %s%s", in, ok, out, errOut)
			}
			continue
		}
		if ok || out != "" || errOut != "petrel: "+want+"\n" {
			t.Fatalf("template %s: ok=%v\nstdout %q\nstderr %q\nwant   %q", in, ok, out, errOut, want)
		}
	}
}

// serveRelay is a petrel serve process the client commands talk to.
type serveRelay struct {
	URL  string      // ws://
	Data string      // its data directory
	Proc *os.Process // the serve process
}

// HTTPURL returns the relay's http:// URL.
func (r serveRelay) HTTPURL() string { return "http://" + strings.TrimPrefix(r.URL, "ws://") }

// startServe runs the petrel binary's serve on a fresh data directory (or
// data, when given) with extra environment (config overrides such as
// PETREL_RELAY_MAX_LIMIT=7), and stops it when the test ends. The relay
// runs in its own process, as in production: a relay inside the test
// process would share its descriptors with every command the test forks,
// and an epoll registration outlives its close while a forked child still
// holds the descriptor, so under load a reused descriptor number can be
// served the old connection's events.
func startServe(t *testing.T, c *cliBin, data string, env ...string) serveRelay {
	t.Helper()
	if data == "" {
		data = filepath.Join(t.TempDir(), "data")
	}
	serve := exec.Command(c.bin, "serve", "--data", data, "--listen", "127.0.0.1:0")
	serve.Env = append(append([]string{}, c.env...), env...)
	var logs relaytest.SyncBuffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	})
	re := regexp.MustCompile(`url=(ws://[0-9.:]+)`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return serveRelay{URL: m[1], Data: data, Proc: serve.Process}
		}
	}
	t.Fatalf("serve did not start:\n%s", logs.String())
	return serveRelay{}
}

// deadRelay returns a ws:// URL where nothing listens.
func deadRelay(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "ws://" + addr
}

func TestClientRelays(t *testing.T) {
	c := newCLI(t)
	alice := relaytest.NewKey("cli-alice")
	banned := relaytest.NewKey("cli-banned")
	r1 := startServe(t, c, "", "PETREL_RELAY_MAX_LIMIT=7", "PETREL_POLICY_BANNED_PUBKEYS="+banned.PK.Hex())
	r2 := startServe(t, c, "")
	sk := alice.SK.Hex()

	// event: printed, published, each relay's OK on stderr.
	out, errOut, ok := c.run("", "event", "--sec", sk, "-c", "hi", r1.URL, r2.URL)
	if !ok || len(lines(out)) != 1 || strings.Count(errOut, ": OK") != 2 {
		t.Fatalf("event: %v\n%s%s", ok, out, errOut)
	}
	first, _ := nostr.ParseEvent([]byte(strings.TrimSpace(out)), nil)
	// A refusal: one relay refuses, the other accepts: per-relay lines,
	// status 1.
	out, errOut, ok = c.run("", "event", "--sec", banned.SK.Hex(), "-c", "spam", r1.URL, r2.URL)
	if ok || !strings.Contains(errOut, r1.URL+": refused: blocked:") || !strings.Contains(errOut, r2.URL+": OK") {
		t.Fatalf("refused event: %v\n%s%s", ok, out, errOut)
	}
	// An unreachable relay: reported, the other still served.
	dead := deadRelay(t)
	_, errOut, ok = c.run("", "event", "--sec", sk, "-c", "partial", r2.URL, dead)
	if ok || !strings.Contains(errOut, dead+": ") || !strings.Contains(errOut, r2.URL+": OK") {
		t.Fatalf("partial publish: %v\n%s", ok, errOut)
	}
	c.fails(dead+": cannot connect: connection refused", "", "req", dead)
	// A relay argument that is not one is named as given ("$RELAY" unset,
	// a scheme without a host), not as completed ("wss://").
	for _, args := range [][]string{{"req", ""}, {"count", "-k", "1", "ws://"}, {"event", "--sec", sk, "-c", "x", "ftp://x"}, {"sync", "-q", ""}, {"stream", "--dir", "down", ""}} {
		c.fails(fmt.Sprintf("%q: not a relay: give host[:port] or a ws:// or wss:// URL", args[len(args)-1]), "", args...)
	}
	if errOut := c.fails("petrel: not a secret key (64 hex characters or nsec): empty", "", "key", "public", ""); strings.Contains(errOut, "nip19") {
		t.Fatalf("key public \"\": %s", errOut)
	}
	httpToo := "not a relay: give host[:port], or a ws://, wss://, http:// or https:// URL"
	c.fails(`"": `+httpToo, "", "relay", "")
	c.fails(`"ws://": `+httpToo, "", "admin", "--sec", sk, "ws://", "supportedmethods")

	// Events from stdin: a signed one is published as it is.
	signed := alice.Event(1, "from stdin", nil, fixtureBase)
	if out := c.must(string(signed.Raw)+"\n", "event", r2.URL); strings.TrimSpace(out) != string(signed.Raw) {
		t.Fatalf("stdin event: %s", out)
	}
	// A template takes the key and flags.
	out = c.must(`{"kind":30023,"content":"article","tags":[["d","a1"]]}`, "event", "--sec", sk, "-t", "title=T")
	tpl, _ := nostr.ParseEvent([]byte(strings.TrimSpace(out)), nil)
	if tpl == nil || tpl.Kind != 30023 || tpl.DTag() != "a1" || len(tpl.Tags) != 2 {
		t.Fatalf("template: %s", out)
	}

	// 20 notes in r1 (page size 7), 5 more in r2 (3 of them also in r1).
	var notes []*nostr.Event
	for i := range 20 {
		notes = append(notes, alice.Event(1, fmt.Sprintf("n%d", i), nostr.Tags{{"t", "cli"}}, fixtureBase+int64(i/2)))
	}
	pub := relaytest.Dial(t, r1.URL)
	for _, ev := range notes {
		pub.MustPublish(ev)
	}
	pub2 := relaytest.Dial(t, r2.URL)
	for _, ev := range notes[:3] {
		pub2.MustPublish(ev)
	}
	npub := nip19.EncodePubKey(alice.PK)
	got := lines(c.must("", "req", "-t", "t=cli", "-a", npub, r1.URL))
	if len(got) != 7 {
		t.Fatalf("req on a relay capped at 7: %d events", len(got))
	}
	got = lines(c.must("", "req", "-t", "t=cli", "--paginate", r1.URL))
	if !sameSet(got, raws(notes)) {
		t.Fatalf("req --paginate: %d events, want the 20", len(got))
	}
	got = lines(c.must("", "req", "-t", "t=cli", "--paginate", "-l", "12", r1.URL))
	if len(got) != 12 {
		t.Fatalf("req --paginate -l 12: %d events", len(got))
	}
	// Two relays: each event once.
	got = lines(c.must("", "req", "-t", "t=cli", "-u", fmt.Sprint(fixtureBase+1), r1.URL, r2.URL))
	if !sameSet(got, raws(notes[:4])) {
		t.Fatalf("req on two relays: %q", got)
	}
	// By id, as note and nevent.
	got = lines(c.must("", "req", "-i", nip19.EncodeNote(notes[5].ID), r1.URL))
	if len(got) != 1 || got[0] != string(notes[5].Raw) {
		t.Fatalf("req -i note: %q", got)
	}
	// count, one relay and several.
	if out := c.must("", "count", "-t", "t=cli", r1.URL); out != "20\n" {
		t.Fatalf("count: %q", out)
	}
	out = c.must("", "count", "-t", "t=cli", r1.URL, r2.URL)
	if !strings.Contains(out, r1.URL+" 20\n") || !strings.Contains(out, r2.URL+" 3\n") {
		t.Fatalf("count on two relays: %q", out)
	}
	// A CLOSED is one line and status 1.
	strict := startServe(t, c, "", "PETREL_RELAY_MAX_FILTER_VALUES=2")
	// The line says closed and gives the relay's message as it is.
	closed := "petrel: " + strict.URL + ": closed: invalid: too many values in kinds (max 2)\n"
	if errOut = c.fails("invalid:", "", "req", "-k", "1,2,3", strict.URL); errOut != closed {
		t.Fatalf("CLOSED: %q, want %q", errOut, closed)
	}
	if errOut = c.fails("invalid:", "", "count", "-k", "1,2,3", strict.URL); errOut != closed {
		t.Fatalf("COUNT's CLOSED: %q, want %q", errOut, closed)
	}

	// fetch: from the hints inside the codes.
	nevent, _ := nip19.EncodeEvent(nip19.EventPointer{ID: first.ID, Relays: []string{r2.URL}})
	if got := strings.TrimSpace(c.must("", "fetch", nevent)); got != string(first.Raw) {
		t.Fatalf("fetch nevent: %q", got)
	}
	naddr, _ := nip19.EncodeAddress(nip19.Address{Identifier: "a1", PubKey: alice.PK, Kind: 30023, Relays: []string{r2.URL}})
	c.fails("not found", "", "fetch", naddr) // the template above was never published
	c.must(string(tpl.Raw)+"\n", "event", r2.URL)
	if got := strings.TrimSpace(c.must("", "fetch", naddr)); got != string(tpl.Raw) {
		t.Fatalf("fetch naddr: %q", got)
	}
	c.fails("no relay to ask", "", "fetch", nip19.EncodeNote(first.ID))
	// A relay given as an argument is asked, wherever it stands.
	if got := strings.TrimSpace(c.must("", "fetch", r2.URL, nip19.EncodeNote(first.ID))); got != string(first.Raw) {
		t.Fatalf("fetch RELAY note: %q", got)
	}
	if errOut := c.fails("give a code to fetch", "", "fetch", r2.URL); errOut != "petrel: give a code to fetch (nevent, naddr, nprofile, note or npub)\n" {
		t.Fatalf("fetch RELAY: %q", errOut)
	}
	// An nsec is not a pointer, and is not shown.
	if errOut := c.fails("an nsec was given", "", "fetch", nip19.EncodeSecretKey(alice.SK)); strings.Contains(errOut, "nsec1") {
		t.Fatalf("fetch nsec showed it: %q", errOut)
	}

	// relay: the NIP-11 document.
	var doc struct {
		SupportedNIPs []int `json:"supported_nips"`
	}
	if err := json.Unmarshal([]byte(c.must("", "relay", r1.URL)), &doc); err != nil || !slices.Contains(doc.SupportedNIPs, 11) {
		t.Fatalf("relay: %v %v", doc, err)
	}
}

// TestClientConnectErrors: a relay that cannot be reached is one line on
// stderr naming it once, with the cause and nothing the client or
// net/http repeat: a closed port, two of them, an upgrade answered with
// an HTTP status, and a listener that never answers, for each command
// that connects.
func TestClientConnectErrors(t *testing.T) {
	c := newCLI(t)
	sk := relaytest.NewKey("cli-connect").SK.Hex()
	only := func(want string, args ...string) {
		t.Helper()
		out, errOut, ok := c.run("", args...)
		if ok || out != "" || errOut != want+"\n" {
			t.Fatalf("%v: ok=%v\nstdout %q\nstderr %q\nwant   %q", args, ok, out, errOut, want+"\n")
		}
	}
	dead := deadRelay(t)
	deadHTTP := "http://" + strings.TrimPrefix(dead, "ws://")
	refused := "cannot connect: connection refused"
	only("petrel: "+dead+": "+refused, "req", dead)
	only("petrel: "+dead+": "+refused, "count", dead)
	only("petrel: "+dead+": "+refused, "relay", dead)
	only("petrel: "+deadHTTP+": "+refused, "admin", dead, "supportedmethods", "--sec", sk)
	out, errOut, ok := c.run("", "event", "--sec", sk, "-c", "x", dead)
	if ok || len(lines(out)) != 1 || errOut != "petrel: "+dead+": "+refused+"\n" {
		t.Fatalf("event to a closed port: %v\n%s%s", ok, out, errOut)
	}
	// sync logs before it connects; its error is the last line.
	_, errOut, ok = c.run("", "sync", "--data", t.TempDir(), dead)
	if l := lines(errOut); ok || len(l) == 0 || l[len(l)-1] != "petrel: "+dead+": "+refused || strings.Contains(errOut, "client: connect") {
		t.Fatalf("sync from a closed port: %v\n%s", ok, errOut)
	}
	dead2 := deadRelay(t)
	only(dead+": "+refused+"\n"+dead2+": "+refused+"\npetrel: not every relay succeeded (see above)", "req", dead, dead2)

	// An upgrade answered with a status.
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	t.Cleanup(busy.Close)
	busyURL := "ws://" + strings.TrimPrefix(busy.URL, "http://")
	only("petrel: "+busyURL+": the relay refused the WebSocket upgrade: HTTP 429 Too Many Requests", "req", busyURL)
	// The same server has no NIP-11 document, nor has a web page.
	only("petrel: "+busyURL+": no usable NIP-11 document: HTTP 429 Too Many Requests", "relay", busyURL)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html></html>"))
	}))
	t.Cleanup(page.Close)
	// Named as given: an http:// URL is not told as the ws:// one.
	only("petrel: "+page.URL+": no usable NIP-11 document: invalid character '<' looking for beginning of value", "relay", page.URL)
	only("petrel: ws://"+strings.TrimPrefix(page.URL, "http://")+": no usable NIP-11 document: invalid character '<' looking for beginning of value", "relay", strings.TrimPrefix(page.URL, "http://"))

	// A listener that takes the connection and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, cn := range held {
				cn.Close()
			}
		}()
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, cn)
		}
	}()
	silent := "ws://" + ln.Addr().String()
	only("petrel: "+silent+": cannot connect: no answer within 300ms", "req", "--timeout", "300ms", silent)
	only("petrel: "+silent+": cannot connect: no answer within 300ms", "relay", "--timeout", "300ms", silent)
	// Interrupted while the relay is silent: said so, not told as the
	// timeout (the dial's abort reads as one). The signal is sent once
	// the command has connected, so its handler is in place.
	quiet, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { quiet.Close() })
	waiting := exec.Command(c.bin, "req", "--timeout", "60s", "ws://"+quiet.Addr().String())
	waiting.Env = c.env
	var waitOut, waitErr strings.Builder
	waiting.Stdout, waiting.Stderr = &waitOut, &waitErr
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	held, err := quiet.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := waiting.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := waiting.Wait(); waiting.ProcessState.ExitCode() != 1 || waitOut.Len() != 0 || waitErr.String() != "petrel: ws://"+quiet.Addr().String()+": interrupted while connecting\n" {
		t.Fatalf("req interrupted while connecting: %v, stdout %q, stderr %q", err, waitOut.String(), waitErr.String())
	}
	// Connected to a relay that never answers the REQ: "interrupted",
	// not "context canceled".
	asked := make(chan struct{}, 1)
	muteURL := afterRequest(t, func(ws *websocket.Conn, _ *http.Request) {
		// The command is past its dial, waiting for events.
		asked <- struct{}{}
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	})
	asking := exec.Command(c.bin, "req", muteURL)
	asking.Env = c.env
	var askOut, askErr strings.Builder
	asking.Stdout, asking.Stderr = &askOut, &askErr
	if err := asking.Start(); err != nil {
		t.Fatal(err)
	}
	<-asked
	if err := asking.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := asking.Wait(); asking.ProcessState.ExitCode() != 1 || askOut.Len() != 0 || askErr.String() != "petrel: "+muteURL+": interrupted\n" {
		t.Fatalf("req interrupted while waiting for EOSE: %v, stdout %q, stderr %q", err, askOut.String(), askErr.String())
	}

	// A server that takes the connection and closes it: connected, so
	// the HTTP request is what failed (EOF, or a reset if the request
	// was still unread).
	hangup, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hangup.Close() })
	go func() {
		for {
			cn, err := hangup.Accept()
			if err != nil {
				return
			}
			cn.Close()
		}
	}()
	hang := hangup.Addr().String()
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"petrel: ws://" + hang + ": the HTTP request failed: ", []string{"relay", "ws://" + hang}},
		{"petrel: http://" + hang + ": the HTTP request failed: ", []string{"admin", "ws://" + hang, "supportedmethods", "--sec", sk}},
	} {
		_, errOut, ok := c.run("", tc.args...)
		if ok || len(lines(errOut)) != 1 || !strings.HasPrefix(errOut, tc.want) {
			t.Fatalf("%v on a server that hangs up: %v %q, want %q...", tc.args, ok, errOut, tc.want)
		}
	}

	// A relay that closes the connection with a reason (a blocked
	// address, its shutdown) after the request, or drops it: told so,
	// not as the client's "client: connection closed: <url>: websocket:
	// close 1008 (policy violation): ...".
	closing := afterRequest(t, func(ws *websocket.Conn, r *http.Request) {
		if r.URL.Path == "/drop" {
			return
		}
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "blocked: your address is blocked by this relay"))
		ws.ReadMessage()
	})
	blocked := "the relay closed the connection: blocked: your address is blocked by this relay (close code 1008)"
	only("petrel: "+closing+": "+blocked, "req", closing)
	only("petrel: "+closing+": "+blocked, "count", closing)
	only("petrel: "+closing+"/drop: the connection to the relay broke (it ended without a close frame)", "req", closing+"/drop")
	// sync's error does not name the relay otherwise: the line does.
	if _, errOut, ok := c.run("", "sync", closing, "--data", filepath.Join(t.TempDir(), "synced")); ok || !strings.HasSuffix(errOut, "\npetrel: "+closing+": "+blocked+"\n") {
		t.Fatalf("sync with a relay that closes the connection: %v %q", ok, errOut)
	}
}

// afterRequest starts a WebSocket server that reads a client's first
// message (its request) and then runs then, closing the connection when
// it returns; it returns the server's ws:// URL.
func afterRequest(t *testing.T, then func(ws *websocket.Conn, r *http.Request)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		then(ws, r)
	}))
	t.Cleanup(srv.Close)
	return "ws://" + strings.TrimPrefix(srv.URL, "http://")
}

// TestClientAuth: a relay that closes a request with "auth-required:"
// gets a NIP-42 AUTH with --auth, then the request again.
func TestClientAuth(t *testing.T) {
	c := newCLI(t)
	alice, bob, carol := relaytest.NewKey("cli-auth-alice"), relaytest.NewKey("cli-auth-bob"), relaytest.NewKey("cli-auth-carol")
	r := startServe(t, c, "")
	dm := alice.Event(4, "for bob", nostr.Tags{{"p", bob.PK.Hex()}}, fixtureBase)
	// Publishing a kind 4 needs no auth; reading it does.
	c.must(string(dm.Raw)+"\n", "event", r.URL)
	for _, cmd := range []string{"req", "count"} {
		errOut := c.fails("pass --auth and --sec", "", cmd, "-k", "4", r.URL)
		if !strings.HasPrefix(errOut, "petrel: "+r.URL+": closed: auth-required: ") || len(lines(errOut)) != 1 {
			t.Fatalf("%s without --auth: %q", cmd, errOut)
		}
	}
	got := lines(c.must("", "req", "-k", "4", "--auth", "--sec", nip19.EncodeSecretKey(bob.SK), r.URL))
	if len(got) != 1 || got[0] != string(dm.Raw) {
		t.Fatalf("req --auth as the recipient: %q", got)
	}
	// Someone else authenticates but is shown nothing of it.
	if got := lines(c.must("", "req", "-k", "4", "--auth", "--sec", carol.SK.Hex(), r.URL)); len(got) != 0 {
		t.Fatalf("req --auth as a third party: %q", got)
	}
	if out := c.must("", "count", "-k", "4", "--auth", "--sec", bob.SK.Hex(), r.URL); out != "1\n" {
		t.Fatalf("count --auth: %q", out)
	}
	// A relay that wants AUTH for everything, publishing included.
	ra := startServe(t, c, "", "PETREL_RELAY_AUTH_REQUIRED=true")
	_, errOut, ok := c.run("", "event", "--sec", alice.SK.Hex(), "-c", "x", ra.URL)
	if ok || !strings.Contains(errOut, "refused: auth-required:") || !strings.Contains(errOut, "pass --auth and --sec") {
		t.Fatalf("event without --auth: %v %s", ok, errOut)
	}
	_, errOut, ok = c.run("", "event", "--auth", "--sec", alice.SK.Hex(), "-c", "x", ra.URL)
	if !ok || !strings.Contains(errOut, ra.URL+": OK") {
		t.Fatalf("event --auth: %v %s", ok, errOut)
	}
	if got := lines(c.must("", "req", "--auth", "--sec", alice.SK.Hex(), ra.URL)); len(got) != 1 {
		t.Fatalf("req --auth: %q", got)
	}
	c.fails("--auth: no secret key", "", "req", "--auth", ra.URL)
}

// TestSyncAuthCLI: petrel sync, run as the binary, against a petrel
// serve that requires NIP-42 authentication (TestClientAuth's relay).
// Without --auth the error is one line saying so and how to pass a key;
// with --auth and $NOSTR_SECRET_KEY the relay's events land in the local
// store.
func TestSyncAuthCLI(t *testing.T) {
	c := newCLI(t)
	alice := relaytest.NewKey("cli-sync-auth-alice")
	ra := startServe(t, c, "", "PETREL_RELAY_AUTH_REQUIRED=true")
	var published []string
	for i := range 3 {
		out := c.must("", "event", "--auth", "--sec", alice.SK.Hex(), "-c", fmt.Sprintf("mirrored %d", i), ra.URL)
		published = append(published, strings.TrimSpace(out))
	}
	data := filepath.Join(t.TempDir(), "mirror")
	errOut := c.fails("requires NIP-42 authentication", "", "sync", ra.URL, "--data", data, "-q")
	var errLines []string
	for _, l := range lines(errOut) {
		if strings.HasPrefix(l, "petrel: ") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "requires NIP-42 authentication") || !strings.Contains(errLines[0], "pass --auth and --sec") {
		t.Fatalf("sync without --auth: %q", errOut)
	}
	if got := lines(c.must("", "req", "--store", data)); len(got) != 0 {
		t.Fatalf("sync without --auth saved %q", got)
	}
	withKey := *c
	withKey.env = append(slices.Clip(c.env), cli.SecretEnv+"="+alice.SK.Hex())
	if out := withKey.must("", "sync", ra.URL, "--data", data, "-q", "--auth"); !strings.Contains(out, "downloaded 3/3") {
		t.Fatalf("sync --auth: %q", out)
	}
	got := lines(c.must("", "req", "--store", data))
	slices.Sort(got)
	slices.Sort(published)
	if !slices.Equal(got, published) {
		t.Fatalf("the mirror holds %q, want %q", got, published)
	}
}

// TestClientAdmin: petrel admin calls NIP-86, signed with NIP-98.
func TestClientAdmin(t *testing.T) {
	c := newCLI(t)
	admin, mallory := relaytest.NewKey("cli-admin"), relaytest.NewKey("cli-mallory")
	r := startServe(t, c, "", "PETREL_SERVER_ADMINS="+admin.PK.Hex())
	sec := nip19.EncodeSecretKey(admin.SK)
	if out := c.must("", "admin", r.URL, "banpubkey", nip19.EncodePubKey(mallory.PK), "spam", "--sec", sec); out != "true\n" {
		t.Fatalf("banpubkey: %q", out)
	}
	out := c.must("", "admin", r.URL, "listbannedpubkeys", "--sec", sec)
	if !strings.Contains(out, mallory.PK.Hex()) || !strings.Contains(out, "spam") {
		t.Fatalf("listbannedpubkeys: %q", out)
	}
	_, errOut, ok := c.run("", "event", "--sec", mallory.SK.Hex(), "-c", "x", r.URL)
	if ok || !strings.Contains(errOut, "blocked:") {
		t.Fatalf("a banned pubkey published: %v %s", ok, errOut)
	}
	c.fails("unauthorized", "", "admin", r.HTTPURL(), "listbannedpubkeys", "--sec", mallory.SK.Hex())
	c.fails("unsupported method", "", "admin", r.URL, "nosuchmethod", "--sec", sec)
	// A pubkey or event method's first parameter must be one: refused
	// before anything is sent (an nsec pasted by mistake stays here, and
	// is not shown), and the list is unchanged.
	for _, a := range [][]string{
		{"banpubkey", sec, "oops"},
		{"banpubkey", "zz"},
		{"banevent", nip19.EncodePubKey(mallory.PK)},
	} {
		errOut := c.fails("not a", "", append([]string{"admin", r.URL}, append(a, "--sec", sec)...)...)
		if !strings.HasPrefix(errOut, "petrel: "+a[0]+": not a") || strings.Contains(errOut, sec[5:]) || len(lines(errOut)) != 1 {
			t.Fatalf("admin %s %s: %q", a[0], a[1][:6], errOut)
		}
	}
	if out := c.must("", "admin", r.URL, "listbannedpubkeys", "--sec", sec); strings.Count(out, `"pubkey"`) != 1 {
		t.Fatalf("listbannedpubkeys after the refused calls: %q", out)
	}
}

// TestClientStore: req and count --store on a real store, opened by the
// command, and through the control socket of a running petrel serve.
func TestClientStore(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	k := relaytest.NewKey("cli-store")
	var evs []*nostr.Event
	for i := range 50 {
		evs = append(evs, k.Event(1+i%2, fmt.Sprintf("s%d", i), nil, fixtureBase+int64(i)))
	}
	// An event longer than the reader's first buffer (16 KiB) through
	// the control socket.
	big := k.Event(1, strings.Repeat("long line ", 5000), nil, fixtureBase-1)
	evs = append(evs, big)
	st := openStoreAt(t, data)
	if _, err := st.Save(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(mode string) {
		t.Helper()
		got := lines(c.must("", "req", "--store", data, "-k", "2", "-l", "5"))
		want := []string{}
		for i := 49; len(want) < 5; i-- {
			if evs[i].Kind == 2 {
				want = append(want, string(evs[i].Raw))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: req --store: %q", mode, got)
		}
		// --verify parses and checks what the store returns (otherwise
		// written as stored).
		if got := lines(c.must("", "req", "--store", data, "--verify", "-k", "2", "-l", "5")); !slices.Equal(got, want) {
			t.Fatalf("%s: req --store --verify: %q", mode, got)
		}
		got = lines(c.must("", "req", "--store", data, "-i", nip19.EncodeNote(evs[7].ID)))
		if len(got) != 1 || got[0] != string(evs[7].Raw) {
			t.Fatalf("%s: req --store by id: %q", mode, got)
		}
		if got := lines(c.must("", "req", "--store", data, "-i", big.ID.Hex(), "-i", evs[3].ID.Hex())); len(got) != 2 || got[0] != string(evs[3].Raw) || got[1] != string(big.Raw) {
			t.Fatalf("%s: req --store of a %d-byte event: %d lines", mode, len(big.Raw), len(got))
		}
		if out := c.must("", "count", "--store", data, "-a", nip19.EncodePubKey(k.PK)); out != "51\n" {
			t.Fatalf("%s: count --store: %q", mode, out)
		}
	}
	check("store opened by the command")
	c.fails("no petrel store there", "", "req", "--store", filepath.Join(dir, "none"))
	if errOut := c.fails("not a directory", "", "req", "--store", filepath.Join(data, "LOCK")); errOut != "petrel: --store "+filepath.Join(data, "LOCK")+": not a directory\n" {
		t.Fatalf("req --store of a file: %q", errOut)
	}

	srv := startServe(t, c, data)
	url := srv.URL
	check("through the running serve")
	// What serve stores is seen at once.
	late := k.Event(2, "late", nil, fixtureBase+100)
	c.must(string(late.Raw)+"\n", "event", url)
	if got := lines(c.must("", "req", "--store", data, "-l", "1")); len(got) != 1 || got[0] != string(late.Raw) {
		t.Fatalf("req --store after a publish: %q", got)
	}
	// A bad filter is refused by the relay's parser with a clear line.
	c.fails("--limit -1", "", "req", "--store", data, "-l", "-1")
	// A store has no live events: --stream with it is refused, not
	// quietly ended at the stored ones.
	c.fails("petrel: --stream follows a relay's live events: give the relay's URL, not --store", "", "req", "--store", data, "--stream")

	// A relay killed leaves its socket behind: the command opens the
	// store itself (package early leaves the run to main, which links
	// the store engine).
	if err := srv.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = srv.Proc.Wait()
	if !cli.IsSocket(cli.ControlSocketPath(data)) {
		t.Fatal("the killed relay left no socket behind")
	}
	if got := lines(c.must("", "req", "--store", data, "-l", "1")); len(got) != 1 || got[0] != string(late.Raw) {
		t.Fatalf("req --store beside a dead relay's socket: %q", got)
	}
}

// initialised runs the binary with args and returns the packages Go
// initialised before it exited (GODEBUG=inittrace=1 prints a line for
// each).
func (c *cliBin) initialised(stdin string, args ...string) map[string]bool {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(slices.Clip(c.env), "GODEBUG=inittrace=1")
	cmd.Stdin = strings.NewReader(stdin)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("%v: %v\n%s", args, err, errb.String())
	}
	pkgs := map[string]bool{}
	for line := range strings.Lines(errb.String()) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			pkgs[f[1]] = true
		}
	}
	return pkgs
}

// A client command runs before the relay's packages are initialised
// (internal/cli/early); the relay's commands, petrel's help, and req
// --store where no relay serves the store, run from main after every
// package.
func TestClientCommandsRunEarly(t *testing.T) {
	c := newCLI(t)
	const (
		cliPkg   = "github.com/petrel-relay/petrel/internal/cli"
		relayPkg = "github.com/petrel-relay/petrel/internal/server"
		storePkg = "github.com/petrel-relay/petrel/internal/store/pebble"
	)
	sk := c.must("", "key", "generate")
	data := filepath.Join(t.TempDir(), "data")
	early := [][]string{
		{"version"},
		{"--version"},
		{"key", "generate"},
		{"key", "public", strings.TrimSpace(sk)},
		{"encode", "note", strings.Repeat("ab", 32)},
		{"key", "--help"},
	}
	for _, args := range early {
		got := c.initialised("", args...)
		if !got[cliPkg] || got[relayPkg] || got[storePkg] || got["main"] {
			t.Errorf("%v: cli initialised %v, server %v, store %v, main %v; want only cli", args, got[cliPkg], got[relayPkg], got[storePkg], got["main"])
		}
	}
	openStoreAt(t, data).Close()
	for _, args := range [][]string{
		{"--help"},
		{"serve", "--check"},
		{"req", "--store", data},
		{"count", "--store=" + data},
	} {
		got := c.initialised("", args...)
		if !got[relayPkg] || !got[storePkg] || !got["main"] {
			t.Errorf("%v: server %v, store %v, main %v initialised; want all", args, got[relayPkg], got[storePkg], got["main"])
		}
	}
	// With a relay serving the store, req and count --store ask it
	// through the control socket, early.
	startServe(t, c, data)
	for _, args := range [][]string{{"req", "--store", data}, {"count", "--store=" + data}} {
		if got := c.initialised("", args...); got[storePkg] || got["main"] {
			t.Errorf("%v beside a running relay: store %v, main %v initialised; want neither", args, got[storePkg], got["main"])
		}
	}
}
