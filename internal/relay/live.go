package relay

import (
	"reflect"
	"slices"
	"strings"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// LiveKeys are the [relay] settings ReloadLimits applies to the running
// relay, by their configuration names: what a message may hold and who
// may send it.
var LiveKeys = []string{
	"auth_required", "max_event_bytes", "max_subscriptions", "max_subscription_values", "max_filters",
	"max_filter_values", "max_limit", "max_subid_length", "max_tags",
	"max_content_bytes", "created_at_future", "created_at_past",
	"count_scan_limit", "max_bad_signatures",
}

// liveConfig is the configuration as it is now, LiveKeys included (the
// relay reads those from here, one atomic load of r.live where a message
// is checked), with the parser's limits made from it.
type liveConfig struct {
	Config
	parse nostr.Limits
}

func newLive(c Config) *liveConfig {
	return &liveConfig{Config: c, parse: nostr.Limits{
		MaxFilters:      c.MaxFilters,
		MaxFilterValues: c.MaxFilterValues,
		MaxTags:         c.MaxTags,
		MaxSubIDLen:     c.MaxSubIDLength,
		MaxContentBytes: max(c.MaxContentBytes, 0),
	}}
}

// withLive returns dst with src's LiveKeys settings.
func withLive(dst, src Config) Config {
	d, s := reflect.ValueOf(&dst).Elem(), reflect.ValueOf(src)
	for i := range d.NumField() {
		tag, _, _ := strings.Cut(d.Type().Field(i).Tag.Get("toml"), ",")
		if slices.Contains(LiveKeys, tag) {
			d.Field(i).Set(s.Field(i))
		}
	}
	return dst
}

// ReloadLimits applies c's LiveKeys settings to the running relay
// (petrel serve's reload), from each connection's next message on; what
// a connection already holds stays (subscriptions past a lowered
// max_subscriptions or max_subscription_values stay open, new ones are
// refused). The rest of c is
// not applied. It fails, changing nothing, if c is invalid.
func (r *Relay) ReloadLimits(c Config) error {
	c = c.Normalize()
	if err := c.Check(); err != nil {
		return err
	}
	r.liveChange.Lock()
	defer r.liveChange.Unlock()
	r.live.Store(newLive(withLive(r.live.Load().Config, c)))
	return nil
}
