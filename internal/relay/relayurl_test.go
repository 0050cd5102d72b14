package relay

import "testing"

func TestNormalizeRelayURL(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		got, ok := normalizeRelayURL(in)
		if want == "" {
			if ok {
				t.Fatalf("normalizeRelayURL(%q) = %q, want refusal", in, got)
			}
			return
		}
		if !ok || got != want {
			t.Fatalf("normalizeRelayURL(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	f("wss://relay.example.com", "wss://relay.example.com")
	f("wss://relay.example.com/", "wss://relay.example.com")
	f("WSS://Relay.Example.COM:443/", "wss://relay.example.com")
	f("ws://relay.example.com:80", "ws://relay.example.com")
	f("ws://relay.example.com:443", "ws://relay.example.com:443")
	f("wss://relay.example.com:8443/path/", "wss://relay.example.com:8443/path")
	f("wss://relay.example.com/Path", "wss://relay.example.com/Path")
	f("https://relay.example.com", "wss://relay.example.com")
	f("http://127.0.0.1:7447", "ws://127.0.0.1:7447")
	f("ws://[::1]:7447/", "ws://[::1]:7447")
	f("wss://relay.example.com/?x=1", "wss://relay.example.com?x=1")
	f("wss://relay.example.com#frag", "wss://relay.example.com")
	f(" wss://relay.example.com ", "wss://relay.example.com")
	f("relay.example.com", "")
	f("ftp://relay.example.com", "")
	f("wss://user@relay.example.com", "")
	f("wss://", "")
	f("", "")
	f("ALL_RELAYS", "")
}

func TestIsLoopbackURL(t *testing.T) {
	f := func(in string, want bool) {
		t.Helper()
		if got := isLoopbackURL(in); got != want {
			t.Fatalf("isLoopbackURL(%q) = %v, want %v", in, got, want)
		}
	}
	f("ws://127.0.0.1:7447", true)
	f("ws://127.1.2.3", true)
	f("ws://localhost:7447/", true)
	f("ws://LOCALHOST", true)
	f("ws://[::1]:7447", true)
	f("ws://[::ffff:127.0.0.1]:7447", true)
	f("wss://relay.example.com", false)
	f("ws://10.0.0.1", false)
	f("ws://localhost.example.com", false)
	f("127.0.0.1", false)
}

func FuzzNormalizeRelayURL(f *testing.F) {
	for _, s := range []string{"wss://relay.example.com/", "WS://[::1]:80/a/", "https://x:443?q#f", "ws://%zz", "wss://a@b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := normalizeRelayURL(s)
		if !ok {
			return
		}
		// Normalizing is idempotent, and the result is itself a relay URL.
		n2, ok2 := normalizeRelayURL(n)
		if !ok2 || n2 != n {
			t.Fatalf("normalize(%q) = %q, normalize again = %q %v", s, n, n2, ok2)
		}
	})
}
