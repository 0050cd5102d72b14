package negentropy

import "errors"

// Errors about how the package is used.
var (
	// ErrFrameSizeLimit is returned by New for a frame size limit that is
	// negative or between 1 and 4095.
	ErrFrameSizeLimit = errors.New("negentropy: frame size limit must be 0 or at least 4096")
	// ErrReservedTimestamp is returned by NewVector for an item whose
	// timestamp is 2^64-1, the value the protocol reserves for infinity.
	ErrReservedTimestamp = errors.New("negentropy: timestamp 2^64-1 is reserved")
	// ErrRole is returned when a call does not fit the side of the session:
	// Initiate twice or after Reconcile, Reconcile on the client,
	// ReconcileClient before Initiate.
	ErrRole = errors.New("negentropy: call not valid for this side of the session")
)

// Errors about a malformed or unacceptable message from the peer. Every
// error Reconcile and ReconcileClient return for a message is one of these
// (possibly wrapped with detail; compare with errors.Is); a relay answers
// them with NEG-ERR.
var (
	// ErrTruncated means the message ended inside a field, or is empty, or
	// an id list announces more ids than the message holds.
	ErrTruncated = errors.New("negentropy: message truncated")
	// ErrVarint means a varint does not fit in 64 bits.
	ErrVarint = errors.New("negentropy: varint overflows 64 bits")
	// ErrInvalidVersion means the first byte is not a Negentropy protocol
	// version byte at all (0x60 to 0x6f).
	ErrInvalidVersion = errors.New("negentropy: invalid protocol version byte")
	// ErrUnsupportedVersion means the message uses a protocol version other
	// than 1. A server that gets it also gets a reply holding the version it
	// supports, which it must send to the client (as NEG-MSG) so that the
	// client can downgrade and retry.
	ErrUnsupportedVersion = errors.New("negentropy: unsupported protocol version")
	// ErrBoundLength means a bound's id prefix is longer than 32 bytes.
	ErrBoundLength = errors.New("negentropy: bound id prefix longer than 32 bytes")
	// ErrBoundOrder means a range's upper bound is below the previous one.
	ErrBoundOrder = errors.New("negentropy: ranges out of order")
	// ErrMode means a range has a mode other than Skip, Fingerprint or
	// IdList.
	ErrMode = errors.New("negentropy: unknown range mode")
)
