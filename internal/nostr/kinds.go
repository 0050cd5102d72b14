package nostr

import "strconv"

// Class is how the relay treats events of a kind (NIP-01).
type Class uint8

const (
	// Regular events are all stored.
	Regular Class = iota
	// Replaceable events (kinds 0, 3, 10000-19999): only the newest per
	// (pubkey, kind) is kept.
	Replaceable
	// Ephemeral events (kinds 20000-29999) are delivered live, never stored.
	Ephemeral
	// Addressable events (kinds 30000-39999): only the newest per
	// (pubkey, kind, d tag) is kept.
	Addressable
)

// String names the class.
func (c Class) String() string {
	switch c {
	case Regular:
		return "regular"
	case Replaceable:
		return "replaceable"
	case Ephemeral:
		return "ephemeral"
	case Addressable:
		return "addressable"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Well-known kinds used by the relay itself.
const (
	KindProfile         = 0
	KindTextNote        = 1
	KindFollows         = 3
	KindEncryptedDM     = 4
	KindDeletion        = 5
	KindRepost          = 6
	KindSeal            = 13
	KindChatMessage     = 14
	KindGenericRepost   = 16
	KindRequestToVanish = 62
	KindGiftWrap        = 1059
	KindClientAuth      = 22242
	KindHTTPAuth        = 27235
)

// KindClass returns the storage class of kind.
func KindClass(kind int) Class {
	switch {
	case kind == 0 || kind == 3 || (10000 <= kind && kind < 20000):
		return Replaceable
	case 20000 <= kind && kind < 30000:
		return Ephemeral
	case 30000 <= kind && kind < 40000:
		return Addressable
	}
	return Regular
}

// IsReplaceable reports whether kind is 0, 3 or in 10000-19999.
func IsReplaceable(kind int) bool { return KindClass(kind) == Replaceable }

// IsEphemeral reports whether kind is in 20000-29999.
func IsEphemeral(kind int) bool { return KindClass(kind) == Ephemeral }

// IsAddressable reports whether kind is in 30000-39999.
func IsAddressable(kind int) bool { return KindClass(kind) == Addressable }

// Class returns the storage class of the event's kind.
func (e *Event) Class() Class { return KindClass(e.Kind) }

// DTag returns the value of the first "d" tag, or "" when there is none
// (NIP-01: an addressable event without a d tag has the address "").
func (e *Event) DTag() string {
	for _, t := range e.Tags {
		if len(t) >= 1 && t[0] == "d" {
			if len(t) >= 2 {
				return t[1]
			}
			return ""
		}
	}
	return ""
}

// Expiration returns the NIP-40 expiration timestamp and true when the event
// has a well-formed "expiration" tag (a non-negative decimal integer).
func (e *Event) Expiration() (int64, bool) {
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == "expiration" {
			v, err := strconv.ParseInt(t[1], 10, 64)
			if err != nil || v < 0 {
				return 0, false
			}
			return v, true
		}
	}
	return 0, false
}

// IsExpired reports whether the event carries an expiration at or before now
// (unix seconds).
func (e *Event) IsExpired(now int64) bool {
	exp, ok := e.Expiration()
	return ok && exp <= now
}

// IsProtected reports whether the event carries the NIP-70 ["-"] tag.
func (e *Event) IsProtected() bool {
	for _, t := range e.Tags {
		if len(t) == 1 && t[0] == "-" {
			return true
		}
	}
	return false
}

// Address identifies a replaceable or addressable event: (kind, pubkey, d).
// For replaceable kinds D is always "".
type Address struct {
	Kind   int
	PubKey PubKey
	D      string
}

// String formats the address as "kind:pubkey:d" (the NIP-01 "a" tag form).
func (a Address) String() string {
	return strconv.Itoa(a.Kind) + ":" + a.PubKey.Hex() + ":" + a.D
}

// ParseAddress parses "kind:pubkey:d". The d part may contain ':'.
func ParseAddress(s string) (Address, bool) {
	var a Address
	i := 0
	for i < len(s) && s[i] != ':' {
		i++
	}
	if i == 0 || i >= len(s) {
		return a, false
	}
	k, err := strconv.Atoi(s[:i])
	if err != nil || k < 0 || k > MaxKind {
		return a, false
	}
	rest := s[i+1:]
	if len(rest) < 64 || (len(rest) > 64 && rest[64] != ':') {
		return a, false
	}
	pk, err := ParsePubKey(rest[:64])
	if err != nil {
		return a, false
	}
	a.Kind, a.PubKey = k, pk
	if len(rest) > 64 {
		a.D = rest[65:]
	}
	return a, true
}

// Address returns the event's address and true for replaceable and
// addressable kinds.
func (e *Event) Address() (Address, bool) {
	switch e.Class() {
	case Replaceable:
		return Address{Kind: e.Kind, PubKey: e.PubKey}, true
	case Addressable:
		return Address{Kind: e.Kind, PubKey: e.PubKey, D: e.DTag()}, true
	}
	return Address{}, false
}

// DeletionTargets returns what a kind-5 deletion request (NIP-09) asks to
// delete: event ids from "e" tags and addresses from "a" tags. Malformed
// tag values are skipped. Whether the deletion is honoured (same author) is
// the store's decision.
func (e *Event) DeletionTargets() (ids []ID, addrs []Address) {
	if e.Kind != KindDeletion {
		return nil, nil
	}
	for _, t := range e.Tags {
		if len(t) < 2 {
			continue
		}
		switch t[0] {
		case "e":
			if id, err := ParseID(t[1]); err == nil {
				ids = append(ids, id)
			}
		case "a":
			if a, ok := ParseAddress(t[1]); ok {
				addrs = append(addrs, a)
			}
		}
	}
	return ids, addrs
}
