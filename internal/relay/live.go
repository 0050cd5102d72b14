package relay

import (
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// liveLimits is the part of the configuration a reload changes under the
// running relay (ReloadLimits): what a message may hold and who may send
// it, read through r.live, one atomic load where a message is checked.
// New takes these fields out of r.cfg (zeroed there, so that a read of
// the stale copy shows in every test of the limit); Config puts them
// back.
type liveLimits struct {
	authRequired     bool
	maxEventBytes    int
	maxSubscriptions int
	maxLimit         int
	countScanLimit   int
	maxBadSignatures int
	createdAtFuture  time.Duration
	createdAtPast    time.Duration
	maxContentBytes  int          // as configured (0 or negative: none)
	parse            nostr.Limits // max_filters, max_filter_values, max_tags, max_subid_length, max_content_bytes
}

// LiveKeys are the [relay] settings ReloadLimits applies to the running
// relay, by their configuration names.
var LiveKeys = []string{
	"auth_required", "max_event_bytes", "max_subscriptions", "max_filters",
	"max_filter_values", "max_limit", "max_subid_length", "max_tags",
	"max_content_bytes", "created_at_future", "created_at_past",
	"count_scan_limit", "max_bad_signatures",
}

// takeLive returns c's live limits and c with them zeroed.
func takeLive(c Config) (*liveLimits, Config) {
	l := &liveLimits{
		authRequired:     c.AuthRequired,
		maxEventBytes:    c.MaxEventBytes,
		maxSubscriptions: c.MaxSubscriptions,
		maxLimit:         c.MaxLimit,
		countScanLimit:   c.CountScanLimit,
		maxBadSignatures: c.MaxBadSignatures,
		createdAtFuture:  c.CreatedAtFuture,
		createdAtPast:    c.CreatedAtPast,
		maxContentBytes:  c.MaxContentBytes,
		parse: nostr.Limits{
			MaxFilters:      c.MaxFilters,
			MaxFilterValues: c.MaxFilterValues,
			MaxTags:         c.MaxTags,
			MaxSubIDLen:     c.MaxSubIDLength,
			MaxContentBytes: max(c.MaxContentBytes, 0),
		},
	}
	c.AuthRequired = false
	c.MaxEventBytes, c.MaxSubscriptions, c.MaxLimit, c.CountScanLimit, c.MaxBadSignatures = 0, 0, 0, 0, 0
	c.CreatedAtFuture, c.CreatedAtPast = 0, 0
	c.MaxFilters, c.MaxFilterValues, c.MaxTags, c.MaxSubIDLength, c.MaxContentBytes = 0, 0, 0, 0, 0
	return l, c
}

// putLive returns c with l's limits in it.
func putLive(c Config, l *liveLimits) Config {
	c.AuthRequired = l.authRequired
	c.MaxEventBytes, c.MaxSubscriptions, c.MaxLimit = l.maxEventBytes, l.maxSubscriptions, l.maxLimit
	c.CountScanLimit, c.MaxBadSignatures = l.countScanLimit, l.maxBadSignatures
	c.CreatedAtFuture, c.CreatedAtPast = l.createdAtFuture, l.createdAtPast
	c.MaxFilters, c.MaxFilterValues, c.MaxTags = l.parse.MaxFilters, l.parse.MaxFilterValues, l.parse.MaxTags
	c.MaxSubIDLength, c.MaxContentBytes = l.parse.MaxSubIDLen, l.maxContentBytes
	return c
}

// ReloadLimits applies c's live limits (LiveKeys: what a message may
// hold, auth_required, created_at bounds, the bad-signature budget) to
// the running relay (petrel serve's reload), from the next message on;
// what a connection already holds stays (subscriptions past a lowered
// max_subscriptions stay open, new ones are refused). The rest of c is
// not applied. It fails, changing nothing, if c is invalid.
func (r *Relay) ReloadLimits(c Config) error {
	c = c.Normalize()
	if err := c.Check(); err != nil {
		return err
	}
	l, _ := takeLive(c)
	r.live.Store(l)
	return nil
}
