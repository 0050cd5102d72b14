// Package deflate builds the compressed messages of the WebSocket
// permessage-deflate extension (RFC 7692) as petrel sends them: without
// context takeover, each message a raw DEFLATE stream of its own, and
// assembled from parts compressed separately.
//
// A part is a run of DEFLATE blocks that ends byte-aligned on an empty
// stored block (a sync flush, the bytes 00 00 ff ff) and never sets
// BFINAL, so parts concatenate into one valid stream; the last part of a
// message drops the final 00 00 ff ff, which the receiver appends (RFC 7692
// 7.2.1). A part that was compressed on its own refers to nothing before
// it, so it may follow any other: an event's body is compressed once and
// put after each subscriber's own prefix (docs/architecture.md,
// "Compression").
package deflate
