package relay

import (
	"slices"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// SupportedNIPs lists the NIPs this relay implements, for NIP-11. A NIP is
// listed only when it works end to end.
func (r *Relay) SupportedNIPs() []int {
	nips := []int{1, 9, 11, 40, 42, 45, 62, 70, 77}
	if r.pol.minPoW.Load() > 0 {
		nips = append(nips, 13)
	}
	if r.searchOK {
		nips = append(nips, 50)
	}
	slices.Sort(nips)
	return nips
}

// Limitation returns the NIP-11 limitation object for the configuration.
func (r *Relay) Limitation() nostr.Limitation {
	c := r.Config()
	pow := int(r.pol.minPoW.Load())
	l := nostr.Limitation{
		MaxMessageLength: c.MaxMessageBytes,
		MaxSubscriptions: c.MaxSubscriptions,
		MaxFilters:       c.MaxFilters,
		MaxLimit:         c.MaxLimit,
		DefaultLimit:     c.MaxLimit,
		MaxSubIDLength:   c.MaxSubIDLength,
		MaxEventTags:     c.MaxTags,
		MaxContentLength: c.MaxEventBytes,
		MinPowDifficulty: pow,
		AuthRequired:     c.AuthRequired,
		RestrictedWrites: r.pol.restrictedWrites || c.AuthRequired || pow > 0 ||
			len(r.pol.lists.AllowedPubKeys()) > 0 || len(r.pol.lists.AllowedKinds()) > 0,
	}
	if c.MaxContentBytes > 0 {
		l.MaxContentLength = c.MaxContentBytes
	}
	if c.CreatedAtPast > 0 {
		l.CreatedAtLowerLimit = int64(c.CreatedAtPast.Seconds())
	}
	if c.CreatedAtFuture > 0 {
		l.CreatedAtUpperLimit = int64(c.CreatedAtFuture.Seconds())
	}
	return l
}
