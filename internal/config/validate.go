package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// signedKeys are the numeric keys whose negative values have a documented
// meaning ("no limit", "off", "never"). Every other numeric key takes 0
// (or no value) for its default and a positive value otherwise: a negative
// one is refused at load, naming the key, instead of reaching the relay
// (a max_limit of -5 would be advertised in NIP-11 and answer every REQ
// with only EOSE).
var signedKeys = map[string]bool{
	"server.max_connections":          true,
	"server.http_reserve":             true,
	"server.max_connections_per_ip":   true,
	"server.compression_min_bytes":    true,
	"server.compression_cache_bytes":  true,
	"relay.count_scan_limit":          true,
	"relay.created_at_future":         true,
	"relay.idle_timeout":              true,
	"relay.max_bad_signatures":        true,
	"relay.max_subscription_values":   true,
	"relay.max_inflight_events":       true,
	"relay.max_event_wait":            true,
	"relay.max_neg_sessions":          true,
	"relay.max_neg_items":             true,
	"relay.neg_items_total":           true,
	"relay.neg_frame_limit":           true,
	"relay.neg_idle_timeout":          true,
	"store.id_filter_bytes":           true,
	"store.body_cache_bytes":          true,
	"cluster.reconnect_buffer":        true,
	"runtime.gc_percent":              true,
	"runtime.memory_release_interval": true,
	"runtime.timer_slack":             true,
	"store.background_pause":          true,
	"store.wal_spares":                true,
	"policy.event_rate":               true,
	"policy.pubkey_event_rate":        true,
	"policy.req_rate":                 true,
	"policy.connect_rate":             true,
}

// upperBounds are the numeric keys with a largest meaningful value.
var upperBounds = map[string]int64{
	"policy.min_pow_difficulty": 256, // bits of an id
	"server.compression_level":  9,   // DEFLATE's levels
	// Past a few milliseconds a thread's late wake-ups would show in
	// the relay's latency (Go's scheduler sleeps microseconds).
	"runtime.timer_slack": int64(10 * time.Millisecond),
	// A flush that sleeps longer a block would fall behind the
	// memtables (it pauses only under no write pressure anyway).
	"store.background_pause": int64(10 * time.Millisecond),
	// Each is 1.1 memtables of disk; pebble makes one new log at a
	// time, and recycles its own once it runs.
	"store.wal_spares": 4,
}

// kindLists are the keys listing event kinds.
var kindLists = map[string]bool{
	"relay.protected_kinds":   true,
	"policy.allowed_kinds":    true,
	"policy.disallowed_kinds": true,
}

// Validate reports the values of c that make no sense, each naming its
// key as the file spells it ("relay.max_limit = -5: ..."): a negative
// number where negative has no meaning, a number above its key's bound, a
// rate that is not a number, a kind outside [0, 65535], an unknown store
// backend or log format or level. c is the configuration as loaded, before
// Normalize (0 means "the default" there). All problems are reported
// together.
func (c Config) Validate() error {
	var errs []error
	walkNumeric(reflect.ValueOf(c), "", func(key string, v reflect.Value) {
		if err := checkNumeric(key, v); err != nil {
			errs = append(errs, err)
		}
	})
	switch c.Store.Backend {
	case "", "pebble", "postgres":
	default:
		errs = append(errs, fmt.Errorf("store.backend = %q: want \"pebble\" or \"postgres\"", c.Store.Backend))
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format = %q: want \"text\" or \"json\"", c.Log.Format))
	}
	switch strings.ToLower(c.Log.Level) {
	case "", "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level = %q: want debug, info, warn or error", c.Log.Level))
	}
	return errors.Join(errs...)
}

// walkNumeric calls fn for every numeric field (and list of ints) of the
// struct v, by its "section.key" name.
func walkNumeric(v reflect.Value, prefix string, fn func(key string, v reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("toml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		name := tag
		if prefix != "" {
			name = prefix + "." + tag
		}
		fv := v.Field(i)
		switch {
		case fv.Type() == reflect.TypeOf(time.Duration(0)):
			fn(name, fv)
		case fv.Kind() == reflect.Struct:
			walkNumeric(fv, name, fn)
		case isNumeric(fv.Kind()), fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Int:
			fn(name, fv)
		}
	}
}

func isNumeric(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// checkNumeric checks one value of key.
func checkNumeric(key string, v reflect.Value) error {
	if v.Kind() == reflect.Slice {
		if !kindLists[key] {
			return nil
		}
		for i := 0; i < v.Len(); i++ {
			if k := v.Index(i).Int(); k < 0 || k > nostr.MaxKind {
				return fmt.Errorf("%s: kind %d is not in [0, %d]", key, k, nostr.MaxKind)
			}
		}
		return nil
	}
	shown := func() string {
		if d, ok := v.Interface().(time.Duration); ok {
			return fmt.Sprintf("%q", d.String())
		}
		return fmt.Sprint(v.Interface())
	}
	var neg bool
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s = %v: want a finite number", key, f)
		}
		neg = f < 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if b, ok := upperBounds[key]; ok && v.Uint() > uint64(b) {
			return fmt.Errorf("%s = %s: the most it can be is %d", key, shown(), b)
		}
		return nil
	default:
		n := v.Int()
		neg = n < 0
		if b, ok := upperBounds[key]; ok && n > b {
			if _, ok := v.Interface().(time.Duration); ok {
				return fmt.Errorf("%s = %s: the most it can be is %q", key, shown(), time.Duration(b).String())
			}
			return fmt.Errorf("%s = %s: the most it can be is %d", key, shown(), b)
		}
	}
	if neg && !signedKeys[key] {
		return fmt.Errorf("%s = %s: must not be negative (0, or leaving it out, takes the default)", key, shown())
	}
	return nil
}
