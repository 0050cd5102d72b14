package importer

import (
	"bytes"
	"fmt"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// check parses and verifies the lines of c.
func (p *pipeline) check(c *chunk) {
	for i, ls := range c.lines {
		no := c.first + int64(i)
		c.n.Lines++
		if ls.tooLong {
			c.n.Invalid++
			p.lineErr(c, no, "", fmt.Sprintf("line longer than %d bytes", p.o.MaxLine))
			continue
		}
		p.checkLine(c, no, c.buf[ls.start:ls.end])
	}
}

func (p *pipeline) lineErr(c *chunk, no int64, id string, msg string) {
	if len(c.errs) < p.o.MaxErrors {
		c.errs = append(c.errs, LineError{Line: no, ID: id, Err: msg})
	}
}

func (p *pipeline) checkLine(c *chunk, no int64, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		c.n.Blank++
		return
	}
	ev, isEvent, err := parseLine(line)
	switch {
	case err != nil:
		c.n.Invalid++
		p.lineErr(c, no, "", nostr.Reason(err))
		return
	case !isEvent:
		c.n.Messages++
		return
	}
	c.n.Events++
	switch {
	case ev.Class() == nostr.Ephemeral:
		c.n.Ephemeral++
		return
	case ev.IsExpired(p.o.Now):
		c.n.Expired++
		return
	case ev.Kind == nostr.KindRequestToVanish && !nostr.VanishAddressedTo(ev, p.o.OwnURL):
		c.n.VanishElsewhere++
		return
	}
	if !nostr.CheckID(ev) {
		c.n.BadID++
		p.lineErr(c, no, ev.ID.Hex(), "id does not match the event")
		return
	}
	if p.verifier != nil && !nostr.VerifyEvent(p.verifier, ev) {
		c.n.BadSig++
		p.lineErr(c, no, ev.ID.Hex(), "bad signature")
		return
	}
	c.events = append(c.events, ev)
	c.evLines = append(c.evLines, no)
}

// parseLine reads one non-blank line, white space trimmed: an event
// object, or an envelope. isEvent is false (with a nil error) for an
// envelope that is not an EVENT. The event's id and signature are not
// checked; the event does not keep line (chunk buffers are reused).
func parseLine(line []byte) (ev *nostr.Event, isEvent bool, err error) {
	if line[0] != '[' {
		ev, err := nostr.ParseEvent(line, nil)
		if err != nil {
			return nil, false, err
		}
		return ev, true, nil
	}
	// ["EVENT",{...}] is a client message, ["EVENT","sub",{...}] a relay
	// message: the second element tells which parser to try first.
	relayFirst := secondElemIsString(line)
	for try := range 2 {
		if (try == 0) == relayFirst {
			m, rerr := nostr.ParseRelayMessage(line)
			if rerr == nil {
				return m.Event, m.Type == nostr.LabelEvent, nil
			}
			if try == 0 {
				err = rerr
			}
		} else {
			m, cerr := nostr.ParseClientMessage(line, nil)
			if cerr == nil {
				return m.Event, m.Type == nostr.MsgEvent, nil
			}
			if try == 0 {
				err = cerr
			}
		}
	}
	return nil, false, err
}

// secondElemIsString reports whether the JSON array in b has a string as
// its second element (after a string label). It only looks, never fails.
func secondElemIsString(b []byte) bool {
	i := 1
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	ws()
	if i >= len(b) || b[i] != '"' {
		return false
	}
	for i++; i < len(b) && b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	i++
	ws()
	if i >= len(b) || b[i] != ',' {
		return false
	}
	i++
	ws()
	return i < len(b) && b[i] == '"'
}
