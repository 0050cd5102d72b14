package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestValidate: nonsense values are refused at load with a message that
// names the key; the documented negative values ("no limit", "off") and
// the edges of each range are accepted.
func TestValidate(t *testing.T) {
	load := func(body string, env ...string) error {
		t.Helper()
		path := filepath.Join(t.TempDir(), "petrel.toml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, env)
		return err
	}
	bad := func(body, want string, env ...string) {
		t.Helper()
		err := load(body, env...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q %v: error %v, want it to contain %q", body, env, err, want)
		}
	}
	good := func(body string, env ...string) {
		t.Helper()
		if err := load(body, env...); err != nil {
			t.Fatalf("%q %v: %v", body, env, err)
		}
	}
	bad("[relay]\nmax_limit = -5\n", "relay.max_limit = -5: must not be negative")
	bad("", "relay.max_limit = -1: must not be negative", "PETREL_RELAY_MAX_LIMIT=-1")
	good("[relay]\nmax_limit = 1\n")
	// An environment value that does not parse is told in words, with the
	// variable and the value (not strconv's "parsing ...: invalid syntax").
	bad("", `environment PETREL_RELAY_MAX_LIMIT: "abc" is not a whole number`, "PETREL_RELAY_MAX_LIMIT=abc")
	bad("", `environment PETREL_RELAY_MAX_LIMIT: "99999999999999999999" is out of range`, "PETREL_RELAY_MAX_LIMIT=99999999999999999999")
	bad("", `environment PETREL_RELAY_QUERY_SLICE: "5" is not a duration (like 300ms, 10s or 1m30s)`, "PETREL_RELAY_QUERY_SLICE=5")
	bad("", `environment PETREL_STORE_DISABLE_SEARCH: "yes" is not true or false`, "PETREL_STORE_DISABLE_SEARCH=yes")
	bad("", `environment PETREL_POLICY_EVENT_RATE: "fast" is not a number`, "PETREL_POLICY_EVENT_RATE=fast")
	bad("", `environment PETREL_POLICY_ALLOWED_KINDS: "abc" is not a whole number`, "PETREL_POLICY_ALLOWED_KINDS=1, abc")
	// An unknown variable names the one it probably meant.
	bad("", "environment PETREL_RELAY_MAX_LIMT: no such setting (did you mean PETREL_RELAY_MAX_LIMIT?)", "PETREL_RELAY_MAX_LIMT=5")
	bad("", "environment PETREL_RELAY_ZZZZZZZZ: no such setting", "PETREL_RELAY_ZZZZZZZZ=5")
	good("", "PETREL_RELAY_MAX_LIMIT=9223372036854775807", "PETREL_RELAY_QUERY_SLICE=5ms", "PETREL_STORE_DISABLE_SEARCH=true", "PETREL_POLICY_EVENT_RATE=2.5")
	good("[relay]\nmax_limit = 0\n") // the default
	bad("[relay]\nquery_slice = \"-10ms\"\n", `relay.query_slice = "-10ms": must not be negative`)
	bad("[relay]\nmax_message_bytes = -1\n", "relay.max_message_bytes")
	bad("[store]\ncache_bytes = -1\n", "store.cache_bytes")
	bad("[cluster]\ndedup_max = -1\n", "cluster.dedup_max")
	bad("[server]\npollers = -2\n", "server.pollers")
	bad("[policy]\nevent_burst = -1\n", "policy.event_burst")
	bad("[policy]\nevent_rate = nan\n", "policy.event_rate = NaN: want a finite number")
	bad("[policy]\nevent_rate = inf\n", "policy.event_rate = +Inf")
	// min_pow_difficulty: at the bound, and just past it.
	good("[policy]\nmin_pow_difficulty = 256\n")
	bad("[policy]\nmin_pow_difficulty = 257\n", "policy.min_pow_difficulty = 257: the most it can be is 256")
	// compression_level: at the bound, and just past it; the
	// compression sizes' negatives mean "every event" and "no cache".
	good("[server]\ncompression_level = 9\n")
	bad("[server]\ncompression_level = 10\n", "server.compression_level = 10: the most it can be is 9")
	good("[server]\ncompression_min_bytes = -1\ncompression_cache_bytes = -1\n")
	// timer_slack: at the bound, and just past it (a duration's bound is
	// shown as one); negative leaves the inherited slack.
	good("[runtime]\ntimer_slack = \"10ms\"\n")
	bad("[runtime]\ntimer_slack = \"10000001ns\"\n", `runtime.timer_slack = "10.000001ms": the most it can be is "10ms"`)
	bad("", `runtime.timer_slack = "11ms": the most it can be is "10ms"`, "PETREL_RUNTIME_TIMER_SLACK=11ms")
	good("[runtime]\ntimer_slack = \"-1ns\"\n")
	// background_pause: the same bound, and negative means none.
	good("[store]\nbackground_pause = \"10ms\"\n")
	bad("[store]\nbackground_pause = \"10000001ns\"\n", `store.background_pause = "10.000001ms": the most it can be is "10ms"`)
	bad("", `store.background_pause = "11ms": the most it can be is "10ms"`, "PETREL_STORE_BACKGROUND_PAUSE=11ms")
	good("[store]\nbackground_pause = \"-1ns\"\n")
	// wal_spares: at the bound, just past it, and negative for none.
	good("[store]\nwal_spares = 4\n")
	bad("[store]\nwal_spares = 5\n", "store.wal_spares = 5: the most it can be is 4")
	bad("", "store.wal_spares = 5: the most it can be is 4", "PETREL_STORE_WAL_SPARES=5")
	good("[store]\nwal_spares = -1\n")
	bad("[relay]\nverify_pending = -1\n", "relay.verify_pending")
	// Kinds: at the bounds, and just past them.
	good("[relay]\nprotected_kinds = [0, 65535]\n")
	bad("[relay]\nprotected_kinds = [65536]\n", "relay.protected_kinds: kind 65536 is not in [0, 65535]")
	bad("[policy]\nallowed_kinds = [-1]\n", "policy.allowed_kinds: kind -1")
	// Documented negatives.
	good("[relay]\nmax_neg_items = -1\ncount_scan_limit = -1\nidle_timeout = \"-1s\"\ncreated_at_future = \"-1s\"\n")
	good("[server]\nmax_connections_per_ip = -1\nhttp_reserve = -1\n[store]\nid_filter_bytes = -1\n[policy]\nevent_rate = -1\n[runtime]\ngc_percent = -1\n")
	// Several problems are reported together.
	bad("[relay]\nmax_limit = -5\nmax_tags = -1\n", "relay.max_tags = -1")
	bad("[store]\nbackend = \"sqlite\"\n", `store.backend = "sqlite"`)
	bad("[log]\nformat = \"xml\"\n", `log.format = "xml"`)
	bad("[log]\nlevel = \"loud\"\n", `log.level = "loud"`)
	good("[log]\nlevel = \"DEBUG\"\nformat = \"json\"\n")
}

// TestValidateCoversEveryKey: every numeric key named as signed or
// bounded exists (a rename cannot leave a stale rule), and every numeric
// key of the file is checked.
func TestValidateCoversEveryKey(t *testing.T) {
	seen := map[string]bool{}
	walkNumeric(reflect.ValueOf(Config{}), "", func(key string, _ reflect.Value) { seen[key] = true })
	for _, m := range []map[string]bool{signedKeys, kindLists} {
		for k := range m {
			if !seen[k] {
				t.Errorf("rule for %s, which is not a numeric key", k)
			}
		}
	}
	for k := range upperBounds {
		if !seen[k] {
			t.Errorf("bound for %s, which is not a numeric key", k)
		}
	}
	var c Config
	fields := map[string]reflect.Value{}
	collect(reflect.ValueOf(&c).Elem(), "", fields)
	n := 0
	for _, f := range fields {
		if isNumeric(f.Kind()) || f.Type() == reflect.TypeOf(time.Duration(0)) || f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Int {
			n++
		}
	}
	if n == 0 || len(seen) != n {
		t.Fatalf("walkNumeric saw %d keys, the file has %d numeric keys", len(seen), n)
	}
}
