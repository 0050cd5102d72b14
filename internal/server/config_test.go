package server

import (
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// TestConfigCheck: Check takes what New takes (admins in every form the
// config's pubkey lists take) and reports every value New would refuse,
// all of them at once, each naming its key.
func TestConfigCheck(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	pk, _ := nostr.ParsePubKey(hex)
	good := []Config{
		{},
		{Listen: "0.0.0.0:7447", PprofListen: "127.0.0.1:6060"},
		{Listen: ":0", Admins: []string{hex, strings.ToUpper(hex), " " + nip19.EncodePubKey(pk) + " "}},
		{TrustedProxies: []string{"127.0.0.1", "10.0.0.0/8", "::1"}, ProxyProtocol: true},
	}
	for _, c := range good {
		if err := c.Check(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := Config{
		Listen:         "7447",
		PprofListen:    "localhost",
		Admins:         []string{hex, "npub1notakey"},
		TrustedProxies: []string{"10.0.0.0/33"},
	}
	err := bad.Check()
	if err == nil {
		t.Fatal("a config with four bad values passed")
	}
	for _, want := range []string{"listen on 7447: ", "pprof listen on localhost: ", `admins: not a public key (64 hex characters, npub or nprofile): "npub1notakey"`, `trusted_proxies: "10.0.0.0/33"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the report does not name %s: %v", want, err)
		}
	}
	if err := (Config{ProxyProtocol: true}).Check(); err == nil || !strings.Contains(err.Error(), "proxy_protocol needs trusted_proxies") {
		t.Errorf("proxy_protocol without trusted_proxies: %v", err)
	}
	// A secret key put where a pubkey goes is named, never shown.
	nsec := nip19.EncodeSecretKey(nostr.SecretKeyFromSeed([]byte("admin")))
	if err := (Config{Admins: []string{nsec}}).Check(); err == nil || strings.Contains(err.Error(), nsec) || !strings.Contains(err.Error(), "admins: not a public key (64 hex characters, npub or nprofile): an nsec was given") {
		t.Errorf("an nsec in admins: %v", err)
	}
}
