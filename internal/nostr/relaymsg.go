package nostr

import (
	"strconv"
	"unsafe"
)

// This file builds relay-to-client messages and parses them (for the load
// client and the test client).
//
// The builders are append-style: they append one complete frame to dst and
// return the extended slice, allocating only when dst must grow. Strings are
// escaped with AppendString.

// Relay-to-client message labels, as they appear on the wire and in
// RelayMessage.Type.
const (
	LabelEvent  = "EVENT"
	LabelOK     = "OK"
	LabelEOSE   = "EOSE"
	LabelClosed = "CLOSED"
	LabelNotice = "NOTICE"
	LabelCount  = "COUNT"
	LabelAuth   = "AUTH"
	LabelNegMsg = "NEG-MSG"
	LabelNegErr = "NEG-ERR"
)

// AppendEventFrame appends ["EVENT",<subID>,<rawEvent>]. rawEvent must be a
// complete event object (Event.Raw); it is copied verbatim.
func AppendEventFrame(dst []byte, subID string, rawEvent []byte) []byte {
	dst = append(dst, `["EVENT",`...)
	dst = AppendString(dst, subID)
	dst = append(dst, ',')
	dst = append(dst, rawEvent...)
	return append(dst, ']')
}

// AppendOK appends ["OK",<id>,<ok>,<msg>] (NIP-01). msg should be "" or
// "prefix: text" (see Rejection).
func AppendOK(dst []byte, id ID, ok bool, msg string) []byte {
	dst = append(dst, `["OK","`...)
	dst = appendHex(dst, id[:])
	if ok {
		dst = append(dst, `",true,`...)
	} else {
		dst = append(dst, `",false,`...)
	}
	dst = AppendString(dst, msg)
	return append(dst, ']')
}

// AppendEOSE appends ["EOSE",<subID>].
func AppendEOSE(dst []byte, subID string) []byte {
	dst = append(dst, `["EOSE",`...)
	dst = AppendString(dst, subID)
	return append(dst, ']')
}

// AppendClosed appends ["CLOSED",<subID>,<msg>].
func AppendClosed(dst []byte, subID, msg string) []byte {
	dst = append(dst, `["CLOSED",`...)
	dst = AppendString(dst, subID)
	dst = append(dst, ',')
	dst = AppendString(dst, msg)
	return append(dst, ']')
}

// AppendNotice appends ["NOTICE",<msg>].
func AppendNotice(dst []byte, msg string) []byte {
	dst = append(dst, `["NOTICE",`...)
	dst = AppendString(dst, msg)
	return append(dst, ']')
}

// AppendCount appends the NIP-45 answer
// ["COUNT",<subID>,{"count":<count>}], adding "approximate":true when
// approximate is set and "hll":"<hex>" when hll is not nil.
func AppendCount(dst []byte, subID string, count int64, approximate bool, hll []byte) []byte {
	dst = append(dst, `["COUNT",`...)
	dst = AppendString(dst, subID)
	dst = append(dst, `,{"count":`...)
	dst = strconv.AppendInt(dst, count, 10)
	if approximate {
		dst = append(dst, `,"approximate":true`...)
	}
	if hll != nil {
		dst = append(dst, `,"hll":"`...)
		dst = appendHex(dst, hll)
		dst = append(dst, '"')
	}
	return append(dst, "}]"...)
}

// AppendAuthChallenge appends ["AUTH",<challenge>] (NIP-42).
func AppendAuthChallenge(dst []byte, challenge string) []byte {
	dst = append(dst, `["AUTH",`...)
	dst = AppendString(dst, challenge)
	return append(dst, ']')
}

// AppendNegMsg appends ["NEG-MSG",<subID>,<hex payload>] (NIP-77).
func AppendNegMsg(dst []byte, subID string, payload []byte) []byte {
	dst = append(dst, `["NEG-MSG",`...)
	dst = AppendString(dst, subID)
	dst = append(dst, `,"`...)
	dst = appendHex(dst, payload)
	return append(dst, `"]`...)
}

// AppendNegErr appends ["NEG-ERR",<subID>,<reason>] (NIP-77).
func AppendNegErr(dst []byte, subID, reason string) []byte {
	dst = append(dst, `["NEG-ERR",`...)
	dst = AppendString(dst, subID)
	dst = append(dst, ',')
	dst = AppendString(dst, reason)
	return append(dst, ']')
}

// RelayMessage is a parsed relay-to-client message. Which fields are set
// depends on Type (one of the Label constants):
//
//	EVENT    SubID, Event, RawEvent
//	OK       EventID, OK, Message
//	EOSE     SubID
//	CLOSED   SubID, Message
//	NOTICE   Message
//	COUNT    SubID, Count, Approximate, HLL
//	AUTH     Message (the challenge)
//	NEG-MSG  SubID, NegPayload
//	NEG-ERR  SubID, Message (the reason)
//
// A RelayMessage does not alias the parsed input.
type RelayMessage struct {
	Type        string
	SubID       string
	Event       *Event // parsed and shape-checked by the ParseEvent rules; not verified
	RawEvent    []byte // Event.Raw
	EventID     ID
	OK          bool
	Message     string
	Count       int64
	Approximate bool
	HLL         []byte // hex-decoded "hll", nil when absent
	NegPayload  []byte // hex-decoded
}

// relayEventMessage lets a RelayMessage and its Event share one allocation.
type relayEventMessage struct {
	m  RelayMessage
	ev Event
}

// ParseRelayMessage parses one relay-to-client message. Events are parsed
// with the ParseEvent rules and no limits. Unknown keys in a COUNT object
// are ignored. On refusal the error is a *ParseError.
func ParseRelayMessage(data []byte) (*RelayMessage, error) {
	if len(data) > maxInput {
		return nil, &ParseError{Msg: "message too large", Bound: BoundMessageBytes}
	}
	p := getParser(data, nil)
	defer putParser(p)
	m, err := p.relayMessage()
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (p *parser) relayMessage() (*RelayMessage, *ParseError) {
	l, err := p.label()
	if err != nil {
		return nil, err
	}
	var typ string
	switch string(l) {
	case LabelEvent:
		typ = LabelEvent
	case LabelOK:
		typ = LabelOK
	case LabelEOSE:
		typ = LabelEOSE
	case LabelClosed:
		typ = LabelClosed
	case LabelNotice:
		typ = LabelNotice
	case LabelCount:
		typ = LabelCount
	case LabelAuth:
		typ = LabelAuth
	case LabelNegMsg:
		typ = LabelNegMsg
	case LabelNegErr:
		typ = LabelNegErr
	default:
		return nil, p.failf("unknown message type %s", quoteShort(l))
	}
	// elem consumes the ',' before the next element.
	elem := func(what string) *ParseError {
		p.ws()
		if p.peek() == ',' {
			p.i++
			p.ws()
			return nil
		}
		if p.peek() == ']' {
			return p.failf("%s: missing %s", typ, what)
		}
		return p.syntax("','")
	}
	done := func() *ParseError {
		p.ws()
		if p.peek() == ',' {
			return p.failf("%s: too many elements", typ)
		}
		if err := p.expect(']'); err != nil {
			return err
		}
		return p.end()
	}
	str := func(what string) (span, *ParseError) {
		if p.peek() != '"' {
			return span{}, p.failf("%s: %s must be a string", typ, what)
		}
		return p.str()
	}

	if typ == LabelEvent {
		if err := elem("subscription id"); err != nil {
			return nil, err
		}
		sub, err := str("subscription id")
		if err != nil {
			return nil, err
		}
		if err := elem("event"); err != nil {
			return nil, err
		}
		if err := p.eventObject(); err != nil {
			return nil, err
		}
		if err := done(); err != nil {
			return nil, err
		}
		x := new(relayEventMessage)
		x.m.Type = typ
		x.m.Event, x.m.SubID = p.finishEvent(&x.ev, p.bytes(sub))
		x.m.RawEvent = x.ev.Raw
		return &x.m, nil
	}

	m := &RelayMessage{Type: typ}
	var sub, msg span
	var hasSub, hasMsg bool
	if err := elem("first argument"); err != nil {
		return nil, err
	}
	switch typ {
	case LabelOK:
		if err := p.hexField(m.EventID[:], "OK: event id"); err != nil {
			return nil, err
		}
		if err := elem("status"); err != nil {
			return nil, err
		}
		if m.OK, err = p.boolVal("OK: status"); err != nil {
			return nil, err
		}
		if err := elem("message"); err != nil {
			return nil, err
		}
		if msg, err = str("message"); err != nil {
			return nil, err
		}
		hasMsg = true
	case LabelNotice, LabelAuth:
		if msg, err = str("message"); err != nil {
			return nil, err
		}
		hasMsg = true
	default: // EOSE, CLOSED, COUNT, NEG-MSG, NEG-ERR
		if sub, err = str("subscription id"); err != nil {
			return nil, err
		}
		hasSub = true
		switch typ {
		case LabelClosed, LabelNegErr:
			if err := elem("message"); err != nil {
				return nil, err
			}
			if msg, err = str("message"); err != nil {
				return nil, err
			}
			hasMsg = true
		case LabelNegMsg:
			if err := elem("payload"); err != nil {
				return nil, err
			}
			if m.NegPayload, err = p.hexBytes("NEG-MSG: payload"); err != nil {
				return nil, err
			}
		case LabelCount:
			if err := elem("result"); err != nil {
				return nil, err
			}
			if err := p.countResult(m); err != nil {
				return nil, err
			}
		}
	}
	if err := done(); err != nil {
		return nil, err
	}
	// One allocation for the strings.
	n := 0
	if hasSub {
		n += int(sub.n)
	}
	if hasMsg {
		n += int(msg.n)
	}
	if n > 0 {
		buf := make([]byte, 0, n)
		if hasSub {
			buf = append(buf, p.bytes(sub)...)
		}
		if hasMsg {
			buf = append(buf, p.bytes(msg)...)
		}
		all := unsafe.String(&buf[0], len(buf))
		if hasSub {
			m.SubID = all[:sub.n]
			all = all[sub.n:]
		}
		if hasMsg {
			m.Message = all
		}
	}
	return m, nil
}

// countResult reads the NIP-45 result object {"count":n, ...}.
func (p *parser) countResult(m *RelayMessage) *ParseError {
	if p.peek() != '{' {
		return p.fail("COUNT: result must be an object")
	}
	p.i++
	p.ws()
	hasCount := false
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			k, err := p.key()
			if err != nil {
				return err
			}
			switch string(k) {
			case "count":
				v, err := p.uintVal(1<<63-1, "COUNT: count")
				if err != nil {
					return err
				}
				m.Count, hasCount = int64(v), true
			case "approximate":
				if m.Approximate, err = p.boolVal("COUNT: approximate"); err != nil {
					return err
				}
			case "hll":
				if m.HLL, err = p.hexBytes("COUNT: hll"); err != nil {
					return err
				}
			default:
				if err := p.skipValue(0); err != nil {
					return err
				}
			}
			more, err := p.next('}')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	if !hasCount {
		return p.fail(`COUNT: missing "count"`)
	}
	return nil
}
