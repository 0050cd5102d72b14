package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadPolicyAndAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "petrel.toml")
	err := os.WriteFile(path, []byte(`
[relay]
url = "wss://relay.example.com"
auth_on_connect = true
auth_required = true
auth_window = "5m"
protected_kinds = []
count_scan_limit = 1000

[server]
admins = ["3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"]

[policy]
event_rate = 2.5
banned_pubkeys = ["3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"]
min_pow_difficulty = 12
plugin_timeout = "3s"
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, []string{"PETREL_POLICY_REQ_RATE=4", "PETREL_POLICY_DISALLOWED_KINDS=7,9"})
	if err != nil {
		t.Fatal(err)
	}
	c = c.Normalize()
	r, p := c.Relay, c.Policy
	if !r.AuthOnConnect || !r.AuthRequired || r.AuthWindow != 5*time.Minute || r.CountScanLimit != 1000 || r.URL != "wss://relay.example.com" {
		t.Fatalf("relay %+v", r)
	}
	if r.ProtectedKinds == nil || len(r.ProtectedKinds) != 0 {
		t.Fatalf("protected_kinds = [] must protect nothing, got %v", r.ProtectedKinds)
	}
	if len(c.Server.Admins) != 1 {
		t.Fatalf("admins %v", c.Server.Admins)
	}
	if p.EventRate != 2.5 || p.EventBurst != 3 || p.ReqRate != 4 || p.MinPoWDifficulty != 12 || p.PluginTimeout != 3*time.Second ||
		len(p.BannedPubKeys) != 1 || len(p.DisallowedKinds) != 2 {
		t.Fatalf("policy %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsAuth(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	c = c.Normalize()
	if got := c.Relay.ProtectedKinds; len(got) != 3 || got[0] != 4 || got[1] != 14 || got[2] != 1059 {
		t.Fatalf("default protected_kinds %v", got)
	}
	if c.Relay.AuthWindow != 10*time.Minute || c.Relay.AuthRequired || c.Relay.AuthOnConnect || c.Relay.MaxAuthPubKeys != 16 {
		t.Fatalf("relay defaults %+v", c.Relay)
	}
	if c.Policy.EventRate != 0 || c.Policy.Plugin != "" || c.Policy.MinPoWDifficulty != 0 {
		t.Fatalf("policy defaults %+v", c.Policy)
	}
}

func TestUnknownPolicyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "petrel.toml")
	os.WriteFile(path, []byte("[policy]\nevent_rat = 1\n"), 0o644)
	if _, err := Load(path, nil); err == nil {
		t.Fatal("a misspelt [policy] key was accepted")
	}
}

// TestConfigKeysChecked: an unknown key names the key it probably meant
// (a typo, or the right key in the wrong section), and a duration written
// as a bare number, which the TOML decoder would take as nanoseconds, is
// refused; the same durations as strings with their units load.
func TestConfigKeysChecked(t *testing.T) {
	load := func(text string) (Config, error) {
		path := filepath.Join(t.TempDir(), "petrel.toml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(path, nil)
	}
	for text, want := range map[string]string{
		"[relay]\nmax_limt = 5\n":               "unknown keys: relay.max_limt (did you mean relay.max_limit?)",
		"[server]\nmax_limit = 5\n":             "unknown keys: server.max_limit (did you mean relay.max_limit?)",
		"max_limit = 5\n":                       "unknown keys: max_limit (did you mean relay.max_limit?)",
		"[relya]\nmax_limit = 5\n":              "unknown keys: relya (did you mean relay?)",
		"[relay]\nzzzzzzzzzz = 1\n":             "unknown keys: relay.zzzzzzzzzz",
		"[runtime]\ntimer_slack = 50\n":         "runtime.timer_slack = 50: a duration is a string with its unit",
		"[relay]\nmax_event_wait = 500\n":       "relay.max_event_wait = 500: a duration is a string with its unit",
		"[cluster]\nheartbeat_interval = 2.5\n": "cluster.heartbeat_interval: a duration is a string with its unit",
	} {
		_, err := load(text)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", text, err, want)
		}
	}
	c, err := load("[runtime]\ntimer_slack = \"50us\"\n[relay]\nmax_event_wait = \"500ms\"\nmax_limit = 5\n")
	if err != nil || c.Runtime.TimerSlack != 50*time.Microsecond || c.Relay.MaxEventWait != 500*time.Millisecond || c.Relay.MaxLimit != 5 {
		t.Fatalf("durations with units: %+v %+v, %v", c.Runtime, c.Relay.MaxEventWait, err)
	}
}

// TestStorePathRelativeToFile: a relative store.path in the file names a
// directory beside the file, whatever the working directory; an absolute
// one is kept, and the environment's is left to the working directory.
func TestStorePathRelativeToFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "petrel.toml")
	f := func(body string, env []string, want string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, env)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Normalize().Store.Path; got != want {
			t.Fatalf("%q %v: store.path %q, want %q", body, env, got, want)
		}
	}
	f("[store]\npath = \"data\"\n", nil, filepath.Join(dir, "data"))
	f("[store]\npath = \"../var/data\"\n", nil, filepath.Join(filepath.Dir(dir), "var", "data"))
	f("[store]\npath = \"/srv/petrel\"\n", nil, "/srv/petrel")
	f("[store]\npath = \"data\"\n", []string{"PETREL_STORE_PATH=here"}, "here")
	f("", nil, "./petrel-data")
}

// TestCompressionSwitch: server.compression is on when unset, off when the
// file or the environment says false, and the environment overrides the
// file.
func TestCompressionSwitch(t *testing.T) {
	dir := t.TempDir()
	f := func(file string, env []string, want bool) {
		t.Helper()
		path := filepath.Join(dir, "petrel.toml")
		if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, env)
		if err != nil {
			t.Fatal(err)
		}
		if got := *c.Normalize().Server.Compression; got != want {
			t.Errorf("file %q env %v: compression %v; want %v", file, env, got, want)
		}
	}
	f("", nil, true)
	f("[server]\ncompression = false\n", nil, false)
	f("[server]\ncompression = true\n", nil, true)
	f("", []string{"PETREL_SERVER_COMPRESSION=false"}, false)
	f("[server]\ncompression = false\n", []string{"PETREL_SERVER_COMPRESSION=true"}, true)
	if _, err := Load(filepath.Join(dir, "petrel.toml"), []string{"PETREL_SERVER_COMPRESSION=maybe"}); err == nil {
		t.Error("PETREL_SERVER_COMPRESSION=maybe accepted")
	}
}

// TestApplyEnvNothingToApply: with no setting in the environment (other
// variables, and PETREL_ ones that are not settings, such as
// PETREL_CONFIG), ApplyEnv allocates nothing: the map of every setting is
// made only for a variable that may set one (a short client command's
// start-up), and a real setting still applies.
func TestApplyEnvNothingToApply(t *testing.T) {
	env := []string{"HOME=/root", "PATH=/bin", "PETREL_CONFIG=", "PETREL_DATA=/tmp/x", "PETREL_PREFAULT=0", "PETREL_CLIENT_SLACK=0", "PETREL_VERIFIER=btcec"}
	var c Config
	if n := testing.AllocsPerRun(20, func() {
		if err := ApplyEnv(&c, env); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations with nothing to apply", n)
	}
	if err := ApplyEnv(&c, append(env, "PETREL_STORE_DISABLE_SEARCH=true")); err != nil || !c.Store.DisableSearch {
		t.Fatalf("a setting after them: %v, disable_search %v", err, c.Store.DisableSearch)
	}
}

// TestChanged names the settings two configurations differ in, as the
// file spells them; none and an empty list are the same.
func TestChanged(t *testing.T) {
	var a Config
	if got := Changed(a, a); len(got) != 0 {
		t.Fatalf("a config against itself: %v", got)
	}
	b := a
	b.Relay.MaxLimit = 5
	b.Policy.BannedPubKeys = []string{"ab"}
	b.Policy.AllowedKinds = []int{}
	off := false
	b.Server.Compression = &off
	b.Store.PostgresSchema = "other"
	got := Changed(a, b)
	want := []string{"policy.banned_pubkeys", "relay.max_limit", "server.compression", "store.postgres_schema"}
	if !slices.Equal(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
	on := true
	a.Server.Compression, b.Server.Compression = &on, &on // two pointers, one value
	if got := Changed(a, b); slices.Contains(got, "server.compression") {
		t.Fatalf("equal values behind two pointers: %v", got)
	}
}

// TestCopy sets the named settings and only those.
func TestCopy(t *testing.T) {
	var dst, src Config
	src.Policy.BannedPubKeys = []string{"ab"}
	src.Policy.BlockedIPs = []string{"10.0.0.0/8"}
	src.Info.Name = "copied"
	src.Relay.MaxLimit = 5
	Copy(&dst, src, "policy.banned_pubkeys", "policy.blocked_ips", "info.name")
	if got := Changed(dst, src); !slices.Equal(got, []string{"relay.max_limit"}) {
		t.Fatalf("after the copy the configs differ in %v, want relay.max_limit only", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a key no setting has was taken")
		}
	}()
	Copy(&dst, src, "policy.no_such_key")
}
