package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
)

// runCheck runs `petrel serve --check` in this process with args and
// returns its standard output and error.
func runCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("PETREL_CONFIG", "")
	root := newRoot(append([]string{"petrel", "serve", "--check"}, args...))
	var out bytes.Buffer
	root.SetOut(&out)
	err := root.Execute()
	return out.String(), err
}

// TestServeCheck: serve --check takes what serve takes and reports, all
// at once, what serve would refuse before serving (the server's, the
// relay's, the policy's, the plugin's, the PostgreSQL store's and the
// cluster's checks), without opening the store: the data directory is
// never made.
func TestServeCheck(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe := filepath.Join(dir, "plugin")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExe := write("not-executable", "#!/bin/sh\n")
	pk, _ := nostr.ParsePubKey(strings.Repeat("ab", 32))

	// Zero config.
	out, err := runCheck(t, "--data", data)
	if err != nil || !strings.HasPrefix(out, "config OK: no config file") || !strings.Contains(out, "listen 127.0.0.1:7447, store pebble at "+data+", one node, verify_mode sync") {
		t.Fatalf("zero config: %q, %v", out, err)
	}
	// A cluster node's file: the PostgreSQL URL (with its password) is
	// not printed, nor the NATS URL's password.
	node := write("node.toml", `
[server]
listen = "0.0.0.0:7447"
admins = ["`+nip19.EncodePubKey(pk)+`"]
trusted_proxies = ["10.0.0.0/8"]
proxy_protocol = true
[relay]
url = "wss://relay.example.com"
verify_mode = "optimistic"
[store]
backend = "postgres"
postgres_url = "postgres://petrel:sekrit@db.example.com/petrel"
postgres_schema = "nodes"
[cluster]
nats_url = "nats://petrel:natsekrit@127.0.0.1:4222"
node = "n1"
[policy]
banned_pubkeys = ["`+nip19.EncodePubKey(pk)+`"]
plugin = "`+exe+`"
`)
	out, err = runCheck(t, "-c", node)
	if err != nil || out != "config OK: "+node+": listen 0.0.0.0:7447, store postgres, schema nodes, cluster on nats://petrel:xxxxx@127.0.0.1:4222, subject petrel.events, verify_mode optimistic\n" {
		t.Fatalf("a cluster node's config: %q, %v", out, err)
	}
	// --listen is checked as the file's listen is.
	if _, err := runCheck(t, "-c", node, "--listen", "7447"); err == nil || !strings.Contains(err.Error(), "listen on 7447: address 7447: missing port in address") {
		t.Fatalf("a bad --listen: %v", err)
	}

	// Everything wrong at once: every problem reported.
	bad := write("bad.toml", `
[server]
admins = ["npub1notakey"]
proxy_protocol = true
[relay]
verify_mode = "later"
[info]
pubkey = "npub1nope"
[store]
backend = "postgres"
postgres_url = "postgres://petrel@db.example.com/petrel"
postgres_schema = "bad-schema"
[policy]
banned_pubkeys = ["zz"]
plugin = "`+notExe+`"
`)
	out, err = runCheck(t, "-c", bad)
	if err == nil || out != "" {
		t.Fatalf("a bad config passed: %q", out)
	}
	for _, want := range []string{
		`server: admins: not a public key (64 hex characters, npub or nprofile): "npub1notakey"`,
		"proxy_protocol needs trusted_proxies",
		`relay: verify_mode "later"`,
		`info: pubkey: not a public key (64 hex characters, npub or nprofile): "npub1nope"`,
		`banned_pubkeys: not a public key (64 hex characters, npub or nprofile): "zz"`,
		`policy: plugin "` + notExe + `"`,
		`schema name "bad-schema"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the report does not say %s: %v", want, err)
		}
	}
	// The cluster over an unshared store, and postgres without its URL.
	solo := write("solo.toml", "[cluster]\nnats_url = \"nats://127.0.0.1:4222\"\n")
	if _, err := runCheck(t, "-c", solo, "--data", data); err == nil || !strings.Contains(err.Error(), "a cluster needs store.backend") {
		t.Fatalf("a cluster on pebble: %v", err)
	}
	// The bus's credentials and TLS files are read: each bad one named.
	pg := "[store]\nbackend = \"postgres\"\npostgres_url = \"postgres://db/petrel\"\n"
	missing := filepath.Join(dir, "missing.creds")
	busFiles := write("bus.toml", pg+"[cluster]\nnats_url = \"tls://nats:4222\"\nnats_credentials = \""+missing+"\"\nnats_tls_ca = \""+notExe+"\"\nnats_tls_cert = \""+notExe+"\"\n")
	_, err = runCheck(t, "-c", busFiles)
	for _, want := range []string{"credentials " + missing, "TLS CA " + notExe + ": no PEM certificate", "TLS client certificate needs its key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad bus files: the report does not say %s: %v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "cluster: cluster:") {
		t.Errorf("a doubled prefix: %v", err)
	}
	// What cluster.New refuses besides the files: a node name too long.
	longName := write("long.toml", pg+"[cluster]\nnats_url = \"nats://nats:4222\"\nnode = \""+strings.Repeat("n", 65)+"\"\n")
	if _, err := runCheck(t, "-c", longName); err == nil || !strings.Contains(err.Error(), "node name must be 1 to 64 bytes, got 65") {
		t.Errorf("a node name of 65 bytes: %v", err)
	}
	alone := write("alone.toml", pg+"[cluster]\nnats_nkey_seed = \"/etc/petrel/nats.nk\"\nnats_tls_ca = \"/etc/petrel/ca.pem\"\n")
	if _, err := runCheck(t, "-c", alone); err == nil || !strings.Contains(err.Error(), "cluster.nats_nkey_seed, cluster.nats_tls_ca set but cluster.nats_url is not") {
		t.Fatalf("bus files without a bus: %v", err)
	}
	nourl := write("nourl.toml", "[store]\nbackend = \"postgres\"\n")
	if _, err := runCheck(t, "-c", nourl); err == nil || !strings.Contains(err.Error(), "store.postgres_url") {
		t.Fatalf("postgres without a URL: %v", err)
	}
	// What config.Load refuses comes first, as serve's does.
	typo := write("typo.toml", "[relay]\nmax_limt = 5\n")
	if _, err := runCheck(t, "-c", typo); err == nil || !strings.Contains(err.Error(), "unknown keys: relay.max_limt") {
		t.Fatalf("an unknown key: %v", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("serve --check made the data directory: %v", err)
	}
}

// TestReloadKeys: every key a reload applies names a setting (a wrong
// name would make config.Copy panic at the reload).
func TestReloadKeys(t *testing.T) {
	relayKeys := map[string]bool{}
	for _, k := range relay.LiveKeys {
		relayKeys["relay."+k] = true
		if !relayLiveKey("relay." + k) {
			t.Errorf("relay.%s is not taken as live", k)
		}
	}
	// Every rate setting of [policy] reloads (a new one left out of
	// rateKeys would silently wait for a restart).
	pt := reflect.TypeOf(policy.Config{})
	for i := range pt.NumField() {
		name, _, _ := strings.Cut(pt.Field(i).Tag.Get("toml"), ",")
		if (strings.HasSuffix(name, "_rate") || strings.HasSuffix(name, "_burst")) && !rateKeys["policy."+name] {
			t.Errorf("policy.%s is a rate setting not in rateKeys", name)
		}
	}
	for _, keys := range []map[string]bool{listKeys, rateKeys, relayKeys} {
		for k := range keys {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s: %v", k, p)
					}
				}()
				var c config.Config
				config.Copy(&c, config.Config{}, k)
			}()
		}
	}
}

// TestBusOptionsMaxEvent: the bridge is told the largest event the relay
// accepts (relay.max_event_bytes, its default when unset), which it
// checks against the NATS server's max_payload at connect.
func TestBusOptionsMaxEvent(t *testing.T) {
	var cfg config.Config
	if got := busOptions(cfg).MaxEventBytes; got != 65536 {
		t.Fatalf("unset: %d, want the relay's default 65536", got)
	}
	cfg.Relay.MaxEventBytes = 300000
	if got := busOptions(cfg).MaxEventBytes; got != 300000 {
		t.Fatalf("set: %d, want 300000", got)
	}
}
