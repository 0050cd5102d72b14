package nostr

import (
	"strconv"
	"strings"
)

// MsgType is the type of a client-to-relay message.
type MsgType uint8

// Client message types (NIP-01, NIP-42, NIP-45, NIP-77).
const (
	MsgUnknown MsgType = iota
	MsgEvent
	MsgReq
	MsgClose
	MsgCount
	MsgAuth
	MsgNegOpen
	MsgNegMsg
	MsgNegClose
)

// String returns the message's label as it appears on the wire.
func (t MsgType) String() string {
	switch t {
	case MsgEvent:
		return "EVENT"
	case MsgReq:
		return "REQ"
	case MsgClose:
		return "CLOSE"
	case MsgCount:
		return "COUNT"
	case MsgAuth:
		return "AUTH"
	case MsgNegOpen:
		return "NEG-OPEN"
	case MsgNegMsg:
		return "NEG-MSG"
	case MsgNegClose:
		return "NEG-CLOSE"
	}
	return "unknown(" + strconv.Itoa(int(t)) + ")"
}

// ClientMessage is a parsed client-to-relay message. Which fields are set
// depends on Type:
//
//	EVENT      Event
//	REQ        SubID, Filters
//	CLOSE      SubID
//	COUNT      SubID, Filters
//	AUTH       Event
//	NEG-OPEN   SubID, Filters (exactly one), NegPayload
//	NEG-MSG    SubID, NegPayload
//	NEG-CLOSE  SubID
//
// Strings and slices may point into the parsed input's private copy; the
// message does not alias the caller's input buffer.
type ClientMessage struct {
	Type       MsgType
	SubID      string
	Event      *Event
	Filters    []Filter
	NegPayload []byte // hex-decoded negentropy message
}

// ParseError is returned for input the parser refuses. It carries what was
// read before the error so the relay can answer in context: an OK for an
// EVENT whose id was read, a CLOSED for a REQ whose subscription id was read,
// a NOTICE otherwise.
type ParseError struct {
	Msg        string  // what was wrong, without a prefix ("bad hex in pubkey")
	Type       MsgType // the message type, if the label was read
	SubID      string  // the subscription id, if it was read
	EventID    ID      // the event id, if HasEventID
	HasEventID bool
	Bound      Bound // the bound exceeded, or BoundNone if the input is malformed
}

// Error returns "nostr: " + Msg.
func (e *ParseError) Error() string { return "nostr: " + e.Msg }

// Reason is err's text without this package's "nostr: ", for a message
// that already names what was read (`line 3: id must be a string`,
// `--filter: unknown filter key "kind"`).
func Reason(err error) string { return strings.TrimPrefix(err.Error(), "nostr: ") }

// Prefix is a NIP-01 machine-readable prefix for OK and CLOSED messages.
type Prefix string

// NIP-01 prefixes (and the ones petrel adds from NIP-42).
const (
	PrefixDuplicate    Prefix = "duplicate"
	PrefixPoW          Prefix = "pow"
	PrefixBlocked      Prefix = "blocked"
	PrefixRateLimited  Prefix = "rate-limited"
	PrefixInvalid      Prefix = "invalid"
	PrefixRestricted   Prefix = "restricted"
	PrefixMute         Prefix = "mute"
	PrefixError        Prefix = "error"
	PrefixAuthRequired Prefix = "auth-required"
)

// Rejection is a protocol-level refusal: what the relay tells the client in
// an OK false, a CLOSED or a NEG-ERR. It is distinct from internal errors,
// which the client only ever sees as "error: ...".
type Rejection struct {
	Prefix Prefix
	Text   string
}

// Reject builds a Rejection.
func Reject(p Prefix, text string) *Rejection { return &Rejection{Prefix: p, Text: text} }

// Error returns the message as sent: "prefix: text".
func (r *Rejection) Error() string { return string(r.Prefix) + ": " + r.Text }
