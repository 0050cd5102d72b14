package relay

import "slices"

// SupportedNIPs lists the NIPs this relay implements, for NIP-11. A NIP is
// listed only when it works end to end.
func (r *Relay) SupportedNIPs() []int {
	nips := []int{1, 9, 11, 40, 42, 45, 62, 70, 77}
	if r.pol.minPoW > 0 {
		nips = append(nips, 13)
	}
	if r.searchOK {
		nips = append(nips, 50)
	}
	slices.Sort(nips)
	return nips
}

// Limitation is the NIP-11 "limitation" object.
type Limitation struct {
	MaxMessageLength    int   `json:"max_message_length"`
	MaxSubscriptions    int   `json:"max_subscriptions"`
	MaxFilters          int   `json:"max_filters"`
	MaxLimit            int   `json:"max_limit"`
	DefaultLimit        int   `json:"default_limit"`
	MaxSubIDLength      int   `json:"max_subid_length"`
	MaxEventTags        int   `json:"max_event_tags"`
	MaxContentLength    int   `json:"max_content_length"`
	MinPowDifficulty    int   `json:"min_pow_difficulty"`
	AuthRequired        bool  `json:"auth_required"`
	PaymentRequired     bool  `json:"payment_required"`
	RestrictedWrites    bool  `json:"restricted_writes"`
	CreatedAtLowerLimit int64 `json:"created_at_lower_limit,omitempty"`
	CreatedAtUpperLimit int64 `json:"created_at_upper_limit,omitempty"`
}

// Limitation returns the NIP-11 limitation object for the configuration.
func (r *Relay) Limitation() Limitation {
	c := r.cfg
	l := Limitation{
		MaxMessageLength: c.MaxMessageBytes,
		MaxSubscriptions: c.MaxSubscriptions,
		MaxFilters:       c.MaxFilters,
		MaxLimit:         c.MaxLimit,
		DefaultLimit:     c.MaxLimit,
		MaxSubIDLength:   c.MaxSubIDLength,
		MaxEventTags:     c.MaxTags,
		MaxContentLength: c.MaxEventBytes,
		MinPowDifficulty: r.pol.minPoW,
		AuthRequired:     c.AuthRequired,
		RestrictedWrites: r.pol.restrictedWrites || c.AuthRequired || r.pol.minPoW > 0 ||
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
