package nostr

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// The relay-URL rule has several consumers; their cases are all here, in
// one table per function, so that a change made for one is checked
// against the others:
//   - relay: NIP-42 "relay" tags and NIP-62 requests to vanish against
//     relay.url (internal/relay);
//   - import: NIP-62 requests to vanish in `petrel import`
//     (internal/importer), which used to have its own copy of the rule;
//   - nip98: NIP-98 "u" tags against relay.url or the request's own URL
//     (internal/server, NIP-86), whose URLs are http(s).

func TestNormalizeRelayURL(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		got, ok := NormalizeRelayURL(in)
		if want == "" {
			if ok {
				t.Fatalf("NormalizeRelayURL(%q) = %q, want refusal", in, got)
			}
			return
		}
		if !ok || got != want {
			t.Fatalf("NormalizeRelayURL(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	// Scheme and host case, default port and trailing slashes do not
	// matter (relay, import, nip98).
	f("wss://relay.example.com", "wss://relay.example.com")
	f("wss://relay.example.com/", "wss://relay.example.com")
	f("wss://relay.example.com//", "wss://relay.example.com")
	f("WSS://Relay.Example.COM:443/", "wss://relay.example.com")
	f("ws://relay.example.com:80", "ws://relay.example.com")
	f("ws://relay.example.com:", "ws://relay.example.com")
	f(" wss://relay.example.com ", "wss://relay.example.com")
	f("wss://relay.example.com#frag", "wss://relay.example.com")
	// Other ports, the path and the query do (relay, nip98).
	f("ws://relay.example.com:443", "ws://relay.example.com:443")
	f("wss://relay.example.com:80", "wss://relay.example.com:80")
	f("wss://relay.example.com:8443/path/", "wss://relay.example.com:8443/path")
	f("wss://relay.example.com/Path", "wss://relay.example.com/Path")
	f("wss://relay.example.com/a%2Fb/", "wss://relay.example.com/a%2Fb")
	f("wss://relay.example.com/?x=1", "wss://relay.example.com?x=1")
	f("wss://relay.example.com?X=1&y", "wss://relay.example.com?X=1&y")
	f("wss://relay.example.com/?", "wss://relay.example.com")
	f("wss://relay.example.com?q=a b", "wss://relay.example.com?q=a%20b")
	f("wss://relay.example.com?q=é", "wss://relay.example.com?q=%C3%A9")
	f("wss://relay.example.com?q=%C3%A9", "wss://relay.example.com?q=%C3%A9")
	// http(s) is the same endpoint as ws(s) (nip98: the request's URL and
	// u tags are http(s); NIP-11 documents are fetched over http(s)).
	f("https://relay.example.com", "wss://relay.example.com")
	f("https://Relay.Example.com:443/", "wss://relay.example.com")
	f("HTTP://relay.example.com:80/", "ws://relay.example.com")
	f("http://relay.example.com:443", "ws://relay.example.com:443")
	f("http://relay.example.com:8080/x?y=1", "ws://relay.example.com:8080/x?y=1")
	f("http://127.0.0.1:7447", "ws://127.0.0.1:7447")
	// IP literals, zones and international names come back parseable.
	f("ws://[::1]:7447/", "ws://[::1]:7447")
	f("ws://[::1]:80/", "ws://[::1]")
	f("ws://[FE80::1%25eth0]:7447", "ws://[fe80::1%25eth0]:7447")
	f("ws://[0:0::0:1]:7447", "ws://[::1]:7447")
	f("ws://[::ffff:127.0.0.1]", "ws://[::ffff:127.0.0.1]")
	f("wss://RÉLAY.example", "wss://r%C3%A9lay.example")
	f("wss://r%C3%A9lay.example", "wss://r%C3%A9lay.example")
	// Not relay URLs.
	f("relay.example.com", "")
	f("//relay.example.com", "")
	f("ftp://relay.example.com", "")
	f("wss://user@relay.example.com", "")
	f("wss://user:pw@relay.example.com", "")
	f("wss:relay.example.com", "")    // opaque (import used to differ)
	f("wss:", "")                     // no host
	f("wss://", "")                   // no host
	f("wss://:443", "")               // empty host (import used to differ)
	f("wss://:443/path", "")          // empty host
	f("ws://relay example.com", "")   // not a URL
	f("ws://relay.example.com:x", "") // not a port
	f("", "")
	f(AllRelays, "")
}

func TestIsLoopbackHost(t *testing.T) {
	f := func(host string, want bool) {
		t.Helper()
		if got := IsLoopbackHost(host); got != want {
			t.Fatalf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
	f("localhost", true)
	f("LocalHost", true)
	f("127.0.0.1", true)
	f("127.1.2.3", true)
	f("::1", true)
	f("::ffff:127.0.0.1", true)
	f("::1%lo", true)
	f("10.0.0.1", false)
	f("::", false)
	f("localhost.example.com", false)
	f("[::1]", false) // brackets are the caller's to strip
	f("", false)
}

func TestParseOwnURL(t *testing.T) {
	f := func(in string, want OwnURL, wantErr bool) {
		t.Helper()
		got, err := ParseOwnURL(in)
		if wantErr {
			if !errors.Is(err, ErrRelayURL) || got != "" {
				t.Fatalf("ParseOwnURL(%q) = %q %v, want ErrRelayURL", in, got, err)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("ParseOwnURL(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	f("", "", false)
	f("WSS://Relay.Example.com/", "wss://relay.example.com", false)
	f("https://relay.example.com?x=1", "wss://relay.example.com?x=1", false)
	f("relay.example.com", "", true)
	f("wss://:443", "", true)
	f("wss:relay.example.com", "", true)
	f(" ", "", true)
}

// ownURLCases are the relay URLs, configured and found in tags, of every
// consumer: own is the configured URL ("" for none), v the tag value.
var ownURLCases = []struct {
	own, v string
	want   bool
}{
	// relay.url set: the normalized URLs must be equal (relay, import).
	{"wss://relay.example.com", "wss://relay.example.com", true},
	{"wss://relay.example.com", "WSS://RELAY.example.com:443/", true},
	{"wss://relay.example.com", "https://relay.example.com", true},
	{"wss://relay.example.com", " wss://relay.example.com/#x", true},
	{"wss://relay.example.com", "wss://relay.example.com:444", false},
	{"wss://relay.example.com", "ws://relay.example.com", false},
	{"wss://relay.example.com", "wss://other.example.com", false},
	{"wss://relay.example.com", "wss://relay.example.com/other", false},
	{"wss://relay.example.com", "ws://127.0.0.1:7447", false},
	{"wss://relay.example.com", AllRelays, false}, // a tag value, not a URL: VanishAddressedTo's
	{"wss://relay.example.com", "", false},
	// The cases `petrel import` used to decide otherwise than the relay:
	// the query, opaque URLs, empty hosts.
	{"wss://relay.example.com", "wss://relay.example.com?x=1", false},
	{"wss://relay.example.com?x=1", "wss://relay.example.com?x=1", true},
	{"wss://relay.example.com?x=1", "wss://relay.example.com/?x=1", true},
	{"wss://relay.example.com?x=1", "wss://relay.example.com", false},
	{"wss://relay.example.com", "wss:relay.example.com", false},
	{"wss://relay.example.com", "wss://:443", false},
	{"", "ws:localhost", false},
	{"", "ws://:7447", false},
	// relay.url not set: any relay URL with a loopback host (relay, import).
	{"", "ws://127.0.0.1:7447", true},
	{"", "ws://127.1.2.3", true},
	{"", "ws://localhost:7447/", true},
	{"", "ws://LOCALHOST", true},
	{"", "ws://[::1]:7447", true},
	{"", "ws://[::ffff:127.0.0.1]:7447", true},
	{"", "ws://127.0.0.1:7447?x=1", true},
	{"", "http://localhost", true},
	{"", "wss://relay.example.com", false},
	{"", "ws://10.0.0.1", false},
	{"", "ws://localhost.example.com", false},
	{"", "ws://user@localhost", false},
	{"", "127.0.0.1", false},
	{"", "not a url", false},
	{"", AllRelays, false},
	// nip98: u tags (http(s) or ws(s)) against relay.url, or against the
	// request's own URL on loopback (the handler passes that as own).
	{"wss://relay.example.com", "https://relay.example.com/", true},
	{"ws://relay.example.com:8080", "http://relay.example.com:8080", true},
	{"wss://relay.example.com", "http://relay.example.com", false},
	{"wss://relay.example.com", "https://relay.example.com/admin", false},
	{"http://127.0.0.1:7447/", "ws://127.0.0.1:7447", true},
	{"http://localhost:7447/", "ws://localhost:7447/", true},
	{"http://127.0.0.1:7447/", "ws://127.0.0.1:7448", false},
	{"http://127.0.0.1:7447/?a=b", "ws://127.0.0.1:7447?a=b", true},
	{"http://127.0.0.1:7447/?a=b", "ws://127.0.0.1:7447", false},
}

func TestOwnURLNames(t *testing.T) {
	for _, c := range ownURLCases {
		own, err := ParseOwnURL(c.own)
		if err != nil {
			t.Fatalf("own %q: %v", c.own, err)
		}
		if got := own.Names(c.v); got != c.want {
			t.Errorf("own %q names %q = %v, want %v", c.own, c.v, got, c.want)
		}
	}
}

func TestVanishAddressedTo(t *testing.T) {
	f := func(own string, tags Tags, want bool) {
		t.Helper()
		o, err := ParseOwnURL(own)
		if err != nil {
			t.Fatal(err)
		}
		ev := &Event{Kind: KindRequestToVanish, Tags: tags}
		if got := VanishAddressedTo(ev, o); got != want {
			t.Fatalf("own %q, tags %v: %v, want %v", own, tags, got, want)
		}
	}
	// A single "relay" tag is decided as OwnURL.Names decides, except for
	// AllRelays, which addresses every relay.
	for _, c := range ownURLCases {
		want := c.want || c.v == AllRelays
		f(c.own, Tags{{"relay", c.v}}, want)
	}
	f("", Tags{{"relay", "all_relays"}}, false)
	f("wss://relay.example.com", Tags{{"relay", "ALL_RELAYS "}}, false)
	// Any one of several tags will do; other tags and short tags do not.
	f("wss://relay.example.com", Tags{{"relay", "wss://other.example"}, {"relay", "wss://relay.example.com/"}}, true)
	f("wss://relay.example.com", Tags{{"r", "wss://relay.example.com"}, {"relay"}, {"p", AllRelays}}, false)
	f("wss://relay.example.com", nil, false)
	f("", Tags{{"relay", "ws://localhost", "extra"}}, true)
}

func FuzzNormalizeRelayURL(f *testing.F) {
	for _, s := range []string{
		"wss://relay.example.com/", "WS://[::1]:80/a/", "https://x:443?q#f", "ws://%zz", "wss://a@b", "",
		"ws://[fe80::1%25eth0]:1/", "wss://r%C3%A9lay.example", "wss:opaque", "wss://:443", "http://h//x//?",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, host, ok := normalizeRelayURL(s)
		if !ok {
			if OwnURL("").Names(s) || OwnURL("wss://relay.example.com").Names(s) {
				t.Fatalf("%q is no relay URL but names a relay", s)
			}
			return
		}
		// The result is a relay URL in its own normal form.
		n2, host2, ok2 := normalizeRelayURL(n)
		if !ok2 || n2 != n || host2 != host {
			t.Fatalf("normalize(%q) = %q (host %q), normalize again = %q (host %q) %v", s, n, host, n2, host2, ok2)
		}
		u, err := url.Parse(n)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.User != nil || u.Fragment != "" ||
			strings.HasSuffix(u.EscapedPath(), "/") || u.Hostname() != host {
			t.Fatalf("normalize(%q) = %q: not a normal relay URL (%v)", s, n, err)
		}
		// A URL names the relay it is the URL of, and the loopback rule
		// follows the host.
		if !OwnURL(n).Names(s) {
			t.Fatalf("%q does not name its own relay %q", s, n)
		}
		if OwnURL("").Names(s) != IsLoopbackHost(host) {
			t.Fatalf("%q: loopback rule %v for host %q", s, OwnURL("").Names(s), host)
		}
		// A trailing slash does not matter.
		if trimmed := strings.TrimSpace(s); !strings.ContainsAny(trimmed, "?#") {
			if ns, ok := NormalizeRelayURL(trimmed + "/"); !ok || ns != n {
				t.Fatalf("%q/ = %q %v, want %q", trimmed, ns, ok, n)
			}
		}
	})
}
