// Package negentropy implements version 1 of the Negentropy range-based set
// reconciliation protocol, the binary protocol that NIP-77 carries
// hex-encoded in NEG-OPEN and NEG-MSG. Fed the same messages, it answers
// with the same bytes as the reference implementations (hoytech/negentropy
// in C++ and JS, go-nostr's nip77), with the one exception described under
// "Deviation"; testdata holds recorded sessions of both that the tests
// replay byte for byte.
//
// The package knows nothing of sockets, JSON, hex or the store. A session
// works on a Vector: the (timestamp, id) items one side holds, sorted and
// immutable. The client (initiator) calls Initiate once and then feeds each
// reply to ReconcileClient until it returns a nil next message, collecting
// the ids it has and needs; the server answers each message with
// Reconcile.
//
// A relay holds one Negentropy per (connection, subscription id). Its
// memory is the Vector's, 40 bytes per item plus 32 bytes per 64 items, so
// the relay bounds a session by how many items it loads (store.Items' max).
// The server side keeps no state between messages: a session needs no
// cleanup beyond dropping it, and a Vector may be shared by sessions over
// the same items. Every message costs the server at most a binary search,
// a fingerprint (at most 64 additions and one SHA-256) and its share of the
// answer per range, and the answer is bounded by the frame size limit; a
// relay should always set one.
//
// A Bridge reconciles two servers with each other when neither set is at
// hand (two relays): it is the client of a session with each, and passes
// each server's description of a range to the other as a fingerprint
// until every differing range is narrowed to both servers' ids.
//
// # Wire format
//
//	Message := <version 0x61> <Range>*
//	Range   := <upper Bound> <mode Varint> <payload>
//	Bound   := <timestamp Varint> <prefix length Varint> <id prefix>
//	payload := ""                                  (mode 0, Skip)
//	         | <16-byte fingerprint>               (mode 1, Fingerprint)
//	         | <count Varint> <32-byte id>*        (mode 2, IdList)
//
// Ranges are adjacent: each starts where the previous one ends (the first
// at timestamp 0 and id 0), and an implicit Skip runs from the last one to
// infinity. Varints are base 128, most significant digit first, the high
// bit set on every byte but the last. A bound's timestamp is 0 for
// infinity and otherwise 1 + the difference from the previous bound's
// timestamp in the same message. Its id prefix is as short as separates the
// two items on either side (padded with zero bytes when compared). A
// fingerprint is the first 16 bytes of SHA-256 over the sum of the range's
// ids (each read as a 256-bit little-endian integer, added mod 2^256,
// written as 32 little-endian bytes) followed by the varint count of ids.
//
// The receiver of a range compares it with its own items there. Equal
// fingerprints end the range (the answer skips it). Otherwise the range is
// split into 16 fingerprinted buckets of near-equal size, or, when it
// holds fewer than 32 items, answered with their ids. A server answers an
// id list with its own id list for the range; a client compares the two
// lists, which tells it what it has and needs, and skips the range. The
// client stops when its answer would be empty.
//
// # Frame size limit
//
// With a frame size limit L (0 means none; otherwise at least 4096), a
// side stops answering ranges once its message would pass L-200 bytes and
// ends the message with one Fingerprint range from the last bound it wrote
// to infinity, so the peer carries on from there next round. A server
// answering an id list cuts the list at that point. Ranges after the cut
// are gone over again, so a client may report an id in more than one
// round.
//
// # Deviation
//
// When the reference implementations cut a message while answering a
// Fingerprint range, the fingerprint that closes the message covers only
// their items from that range's upper bound on, although the range it is
// sent for starts at the last bound written. That can make the peer's
// fingerprint match when the sets differ: a session can then end without
// reporting some ids (TestTailFingerprintRegression builds such a case,
// and testdata/gonostr-tail-loss.txt records go-nostr missing 1200 ids on
// it). This package fingerprints exactly the items of the range it sends.
// Only that fingerprint differs, only in messages cut that way; the peer
// cannot tell from the format. A reference client can still mislead our
// server the same way: the fix is on the sender's side.
//
// # Concurrency
//
// A Vector is immutable after NewVector and safe for concurrent use. A
// Negentropy is not safe for concurrent use.
package negentropy
