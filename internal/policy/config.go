package policy

import (
	"fmt"
	"math"
	"time"
)

// Config configures write policy: the static write lists, the rate limits
// and the write-policy plugin. It is the [policy] section of the
// configuration file. The zero value switches everything off: no lists, no
// limits, no plugin. Normalize fills the defaults of the fields that only
// matter once a feature is on.
type Config struct {
	// EventRate is how many EVENTs per second one client address (an IPv4
	// address, or an IPv6 /64) may send, refilled continuously; with many
	// nodes, through all of them together. Default 0: no limit. Negative:
	// no limit.
	EventRate float64 `toml:"event_rate"`
	// EventBurst is how many EVENTs one address may send at once before
	// EventRate applies. Default: EventRate rounded up (at least 1).
	EventBurst int `toml:"event_burst"`
	// PubKeyEventRate is how many events per second one author (event
	// pubkey) may publish, whatever address (and, with many nodes,
	// whichever node) they come from. Default 0: no limit.
	PubKeyEventRate float64 `toml:"pubkey_event_rate"`
	// PubKeyEventBurst is the burst for PubKeyEventRate. Default:
	// PubKeyEventRate rounded up (at least 1).
	PubKeyEventBurst int `toml:"pubkey_event_burst"`
	// ReqRate is how many REQ, COUNT and NEG-OPEN messages per second one
	// client address may send (with many nodes, through all of them
	// together). Default 0: no limit.
	ReqRate float64 `toml:"req_rate"`
	// ReqBurst is the burst for ReqRate. Default: ReqRate rounded up (at
	// least 1).
	ReqBurst int `toml:"req_burst"`
	// ConnectRate is how many connections per second one client address
	// may open (WebSockets and plain HTTP requests such as NIP-11 alike;
	// with many nodes, to all of them together), refilled continuously;
	// past it a connection is closed at once, or, from behind a trusted
	// proxy, answered 429. It bounds the churn one
	// address can cause (each connection costs an upgrade, a session and,
	// at the proxy, a TLS handshake), where max_connections_per_ip bounds
	// how many it holds. Default 0: no limit.
	ConnectRate float64 `toml:"connect_rate"`
	// ConnectBurst is how many connections one address may open at once
	// before ConnectRate applies. Default: ConnectRate rounded up (at
	// least 1).
	ConnectBurst int `toml:"connect_burst"`
	// RateMaxKeys bounds the number of addresses (or pubkeys) each rate
	// limit tracks at once; past it the least recently used of a sample
	// are forgotten. Rounded up to a multiple of 32. Default 100000 keys
	// (about 10 MB per limit at most).
	RateMaxKeys int `toml:"rate_max_keys"`

	// BannedPubKeys lists pubkeys (hex, npub or nprofile) that may not
	// publish. Default empty.
	BannedPubKeys []string `toml:"banned_pubkeys"`
	// AllowedPubKeys lists pubkeys (hex, npub or nprofile) that may publish; when this list
	// (or its NIP-86 counterpart) is not empty, nobody else may. Default
	// empty: everyone may.
	AllowedPubKeys []string `toml:"allowed_pubkeys"`
	// AllowedKinds lists the event kinds accepted; when this list (or its
	// NIP-86 counterpart) is not empty, other kinds are refused. Default
	// empty: all kinds.
	AllowedKinds []int `toml:"allowed_kinds"`
	// DisallowedKinds lists event kinds that are refused. Default empty.
	DisallowedKinds []int `toml:"disallowed_kinds"`
	// BlockedIPs lists client addresses ("203.0.113.7", "2001:db8::1") and
	// prefixes ("203.0.113.0/24", "2001:db8::/32") that may not connect.
	// Default empty.
	BlockedIPs []string `toml:"blocked_ips"`

	// Plugin is the write-policy plugin: a path to an executable (watched:
	// the plugin restarts when the file changes), or, if it contains a
	// space or a tab, a shell command run with /bin/sh -c (not watched), as
	// in strfry. Default "": no plugin.
	Plugin string `toml:"plugin"`
	// PluginTimeout is how long an event may wait for the plugin's answer
	// (queueing included) before it is rejected with "error: write policy
	// plugin timed out". Default 2s.
	PluginTimeout time.Duration `toml:"plugin_timeout"`
	// PluginMaxInflight bounds the events waiting for the plugin; beyond it
	// events are refused at once with "rate-limited:". Default 1024.
	PluginMaxInflight int `toml:"plugin_max_inflight"`

	// MinPoWDifficulty is the NIP-13 proof-of-work difficulty (leading zero
	// bits of the id) an event needs. The relay checks it; this package
	// only carries the value. Default 0: none.
	MinPoWDifficulty int `toml:"min_pow_difficulty"`
}

// Default values filled in by Normalize.
const (
	DefaultRateMaxKeys       = 100000
	DefaultPluginTimeout     = 2 * time.Second
	DefaultPluginMaxInflight = 1024
)

// Normalize returns c with defaults filled in for zero fields. Negative
// rates become 0 (off).
func (c Config) Normalize() Config {
	burst := func(rate float64, b *int) {
		if rate > 0 && *b <= 0 {
			*b = int(math.Max(1, math.Ceil(rate)))
		}
	}
	for _, r := range []*float64{&c.EventRate, &c.PubKeyEventRate, &c.ReqRate, &c.ConnectRate} {
		if *r < 0 || math.IsNaN(*r) {
			*r = 0
		}
	}
	burst(c.EventRate, &c.EventBurst)
	burst(c.PubKeyEventRate, &c.PubKeyEventBurst)
	burst(c.ReqRate, &c.ReqBurst)
	burst(c.ConnectRate, &c.ConnectBurst)
	if c.RateMaxKeys <= 0 {
		c.RateMaxKeys = DefaultRateMaxKeys
	}
	if c.PluginTimeout <= 0 {
		c.PluginTimeout = DefaultPluginTimeout
	}
	if c.PluginMaxInflight <= 0 {
		c.PluginMaxInflight = DefaultPluginMaxInflight
	}
	if c.MinPoWDifficulty < 0 {
		c.MinPoWDifficulty = 0
	}
	return c
}

// Validate reports configuration values that cannot be used: malformed
// pubkeys, addresses or kinds, or a PoW difficulty above 256.
func (c Config) Validate() error {
	_, err := newStatic(c)
	if err != nil {
		return err
	}
	if c.MinPoWDifficulty > 256 {
		return fmt.Errorf("policy: min_pow_difficulty %d is above 256", c.MinPoWDifficulty)
	}
	return nil
}
