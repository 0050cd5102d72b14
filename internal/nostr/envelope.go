package nostr

// This file parses client-to-relay messages (NIP-01, NIP-42, NIP-45,
// NIP-77):
//
//	["EVENT", <event>]
//	["REQ", <subid>, <filter>, ...]        at least one filter
//	["CLOSE", <subid>]
//	["COUNT", <subid>, <filter>, ...]      at least one filter
//	["AUTH", <event>]
//	["NEG-OPEN", <subid>, <filter>, <hex>]
//	["NEG-MSG", <subid>, <hex>]
//	["NEG-CLOSE", <subid>]
//
// Subscription ids are non-empty strings of at most Limits.MaxSubIDLen
// bytes (after unescaping). Negentropy payloads are hex of even length
// (either case is accepted). The message must be one JSON array with
// nothing after it but whitespace; extra elements are refused.

// ParseClientMessage parses one client-to-relay message. lim may be nil (no
// limits). The result does not alias data: events own their bytes (see
// ParseEvent) and subscription ids, filter strings and payloads live in
// private allocations.
//
// On refusal the error is a *ParseError whose Type is set once the label
// was read (MsgUnknown for an unknown label, named in Msg), whose SubID is
// set once a valid subscription id was read, and whose EventID is set once
// an event's id was read. Bound names the bound that was exceeded (too many
// filters or values, a subscription id or content too long, too many tags
// or tag elements, an input over the size ceiling), or is BoundNone.
func ParseClientMessage(data []byte, lim *Limits) (*ClientMessage, error) {
	if len(data) > maxInput {
		return nil, &ParseError{Msg: "message too large", Bound: BoundMessageBytes}
	}
	p := getParser(data, lim)
	defer putParser(p)
	m, err := p.clientMessage()
	if err != nil {
		return nil, err
	}
	return m, nil
}

// label reads the message's first element, a string, and the ',' after it
// unless the array ends there. It returns the decoded label, valid until the
// next key or string read.
func (p *parser) label() ([]byte, *ParseError) {
	p.ws()
	if p.peek() != '[' {
		return nil, p.fail("message must be a JSON array")
	}
	p.i++
	p.ws()
	if p.peek() != '"' {
		return nil, p.fail("message must start with a string label")
	}
	start, end, esc, err := p.lexString()
	if err != nil {
		return nil, err
	}
	l := p.d[start:end]
	if esc {
		p.kbuf = unescape(p.kbuf[:0], l)
		l = p.kbuf
	}
	return l, nil
}

// comma consumes the ',' before the next element; what names that element
// in the error if the array ends instead.
func (p *parser) comma(what string) *ParseError {
	p.ws()
	if p.peek() == ',' {
		p.i++
		p.ws()
		return nil
	}
	if p.peek() == ']' {
		return p.failf("missing %s", what)
	}
	return p.syntax("','")
}

// closeArray consumes the final ']' and checks that nothing follows.
func (p *parser) closeArray() *ParseError {
	p.ws()
	if p.peek() == ',' {
		return p.fail("too many elements")
	}
	if err := p.expect(']'); err != nil {
		return err
	}
	return p.end()
}

// subscriptionID reads a subscription id and records it for error context.
func (p *parser) subscriptionID() (span, *ParseError) {
	if p.peek() != '"' {
		return span{}, p.fail("subscription id must be a string")
	}
	s, err := p.str()
	if err != nil {
		return span{}, err
	}
	if s.n == 0 {
		return span{}, p.fail("subscription id must not be empty")
	}
	if int(s.n) > p.lim.subIDLen {
		return span{}, p.limitf(BoundSubIDLen, "subscription id too long: %d bytes (max %d)", s.n, p.lim.subIDLen)
	}
	p.subID, p.hasSubID = s, true
	return s, nil
}

// clientEventMessage lets a ClientMessage and its Event share one
// allocation.
type clientEventMessage struct {
	m  ClientMessage
	ev Event
}

func (p *parser) clientMessage() (*ClientMessage, *ParseError) {
	l, err := p.label()
	if err != nil {
		return nil, err
	}
	switch string(l) {
	case "EVENT":
		p.typ = MsgEvent
	case "REQ":
		p.typ = MsgReq
	case "CLOSE":
		p.typ = MsgClose
	case "COUNT":
		p.typ = MsgCount
	case "AUTH":
		p.typ = MsgAuth
	case "NEG-OPEN":
		p.typ = MsgNegOpen
	case "NEG-MSG":
		p.typ = MsgNegMsg
	case "NEG-CLOSE":
		p.typ = MsgNegClose
	default:
		return nil, p.failf("unknown message type %s", quoteShort(l))
	}

	switch p.typ {
	case MsgEvent, MsgAuth:
		if err := p.comma("event"); err != nil {
			return nil, err
		}
		start := p.i
		if err := p.eventObject(); err != nil {
			if !err.HasEventID {
				// Refused before its id was read: find the id anyway, so
				// that the refusal can be an OK the client waits for.
				err.EventID, err.HasEventID = recoverEventID(p.d[start:])
			}
			return nil, err
		}
		if err := p.closeArray(); err != nil {
			return nil, err
		}
		x := new(clientEventMessage)
		x.m.Type = p.typ
		x.m.Event, _ = p.finishEvent(&x.ev, nil)
		return &x.m, nil
	}

	if err := p.comma("subscription id"); err != nil {
		return nil, err
	}
	sub, err := p.subscriptionID()
	if err != nil {
		return nil, err
	}
	m := &ClientMessage{Type: p.typ}
	switch p.typ {
	case MsgReq, MsgCount:
		if err := p.comma("filter"); err != nil {
			return nil, err
		}
		for {
			if len(p.filters) >= p.lim.filters {
				return nil, p.limitf(BoundFilters, "too many filters (max %d)", p.lim.filters)
			}
			if err := p.filter(); err != nil {
				return nil, err
			}
			more, err := p.next(']')
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
		}
		if err := p.end(); err != nil {
			return nil, err
		}
	case MsgNegOpen:
		if err := p.comma("filter"); err != nil {
			return nil, err
		}
		if err := p.filter(); err != nil {
			return nil, err
		}
		if err := p.comma("negentropy message"); err != nil {
			return nil, err
		}
		if m.NegPayload, err = p.hexBytes("negentropy message"); err != nil {
			return nil, err
		}
		if err := p.closeArray(); err != nil {
			return nil, err
		}
	case MsgNegMsg:
		if err := p.comma("negentropy message"); err != nil {
			return nil, err
		}
		if m.NegPayload, err = p.hexBytes("negentropy message"); err != nil {
			return nil, err
		}
		if err := p.closeArray(); err != nil {
			return nil, err
		}
	case MsgClose, MsgNegClose:
		if err := p.closeArray(); err != nil {
			return nil, err
		}
	}
	if len(p.filters) > 0 {
		m.Filters = make([]Filter, len(p.filters))
	}
	m.SubID = p.finishFilters(m.Filters, p.bytes(sub))
	return m, nil
}
