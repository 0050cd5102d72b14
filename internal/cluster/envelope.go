package cluster

import (
	"encoding/binary"
	"fmt"
)

// The envelope is what one bus message carries: a fixed binary header and,
// for an event, the event's raw JSON as the accepting node received it.
//
//	offset  size  field
//	0       1     version (1)
//	1       1     type: 1 event, 2 heartbeat, 3 goodbye (the origin is
//	              closing; its sequence field is as in a heartbeat)
//	2       2     header length H, big endian: the payload starts at H
//	4       1     origin name length n (1..MaxNodeName)
//	5       n     origin name
//	5+n     8     origin boot id (random)
//	13+n    8     origin boot time, unix nanoseconds
//	21+n    8     bus sequence: an event's own number (1, 2, ...); in a
//	              heartbeat or goodbye, the number of the last event sent
//	              before it
//	29+n    8     send time, unix nanoseconds, by the origin's clock
//	37+n    8     commit position (store.SaveResult.Seq; 0: never stored)
//	45+n    ...   fields a later version may add (skipped by H)
//	H       ...   payload: the raw event JSON; empty otherwise
//
// A later version adds fields before H and keeps version 1, so older nodes
// still read it; the version changes only when a field changes meaning.
// Origin = name, boot id and boot time (bytes 4 to 21+n): a restarted node
// is a new origin whose sequence starts again at 1.
const (
	envVersion   = 1
	envEvent     = 1
	envHeartbeat = 2
	envBye       = 3

	envFixed = 5 + 40 // header bytes besides the origin name
)

// envelope is a decoded bus message. Its slices point into the message.
type envelope struct {
	typ      byte
	origin   []byte // name length, name, boot id, boot time: the origin's key
	name     []byte
	boot     uint64
	bootTime int64
	seq      uint64
	sent     int64
	commit   uint64
	payload  []byte
}

// originHeader is the part of the header that names one origin, built
// once per bridge: name length, name, boot id, boot time.
func originHeader(name string, boot uint64, bootTime int64) []byte {
	b := make([]byte, 0, 1+len(name)+16)
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint64(b, boot)
	return binary.BigEndian.AppendUint64(b, uint64(bootTime))
}

// envelopeHeader is the length of an envelope's header for origin (an
// originHeader): what a message holds besides the event.
func envelopeHeader(origin []byte) int { return 4 + len(origin) + 24 }

// appendEnvelope appends an envelope to dst. origin is an originHeader;
// payload is empty for a heartbeat.
func appendEnvelope(dst []byte, typ byte, origin []byte, seq uint64, sent int64, commit uint64, payload []byte) []byte {
	h := envelopeHeader(origin)
	dst = append(dst, envVersion, typ, byte(h>>8), byte(h))
	dst = append(dst, origin...)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(sent))
	dst = binary.BigEndian.AppendUint64(dst, commit)
	return append(dst, payload...)
}

// decodeEnvelope reads a bus message. The envelope's slices point into
// msg. It returns ErrVersion for another version and ErrEnvelope for
// anything malformed.
func decodeEnvelope(msg []byte, e *envelope) error {
	if len(msg) < 4 {
		return fmt.Errorf("%w: %d bytes", ErrEnvelope, len(msg))
	}
	if msg[0] != envVersion {
		return fmt.Errorf("%w: %d", ErrVersion, msg[0])
	}
	typ := msg[1]
	if typ != envEvent && typ != envHeartbeat && typ != envBye {
		return fmt.Errorf("%w: type %d", ErrEnvelope, typ)
	}
	h := int(binary.BigEndian.Uint16(msg[2:4]))
	if h > len(msg) || h < envFixed+1 {
		return fmt.Errorf("%w: header length %d of %d bytes", ErrEnvelope, h, len(msg))
	}
	n := int(msg[4])
	if n == 0 || n > MaxNodeName || envFixed+n > h {
		return fmt.Errorf("%w: origin name length %d", ErrEnvelope, n)
	}
	p := 5 + n
	*e = envelope{
		typ:      typ,
		origin:   msg[4 : p+16],
		name:     msg[5:p],
		boot:     binary.BigEndian.Uint64(msg[p:]),
		bootTime: int64(binary.BigEndian.Uint64(msg[p+8:])),
		seq:      binary.BigEndian.Uint64(msg[p+16:]),
		sent:     int64(binary.BigEndian.Uint64(msg[p+24:])),
		commit:   binary.BigEndian.Uint64(msg[p+32:]),
		payload:  msg[h:],
	}
	switch {
	case typ != envEvent && len(e.payload) != 0:
		return fmt.Errorf("%w: heartbeat with a payload", ErrEnvelope)
	case typ == envEvent && len(e.payload) == 0:
		return fmt.Errorf("%w: event without a payload", ErrEnvelope)
	case typ == envEvent && e.seq == 0:
		return fmt.Errorf("%w: event with sequence 0", ErrEnvelope)
	}
	return nil
}
