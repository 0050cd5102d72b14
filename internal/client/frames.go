package client

import (
	"encoding/hex"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// This file builds client-to-relay frames. They are append-style, like the
// relay-to-client builders of internal/nostr (relaymsg.go): each appends
// one complete frame to dst and returns the extended slice.

// appendFilters appends ["<label>",<id>,<filter>...] (REQ, COUNT).
func appendFilters(dst []byte, label, id string, filters []nostr.Filter) []byte {
	dst = appendLabel(dst, label)
	dst = nostr.AppendString(dst, id)
	for i := range filters {
		dst = append(dst, ',')
		dst = nostr.AppendFilter(dst, &filters[i])
	}
	return append(dst, ']')
}

// appendSubEnd appends ["<label>",<id>] (CLOSE, NEG-CLOSE).
func appendSubEnd(dst []byte, label, id string) []byte {
	dst = appendLabel(dst, label)
	dst = nostr.AppendString(dst, id)
	return append(dst, ']')
}

// appendEventMsg appends ["<label>",<event>] (EVENT, AUTH): ev.Raw as it
// is, or ev serialized when it has no Raw.
func appendEventMsg(dst []byte, label string, ev *nostr.Event) []byte {
	dst = appendLabel(dst, label)
	if ev.Raw != nil {
		dst = append(dst, ev.Raw...)
	} else {
		dst = nostr.AppendEvent(dst, ev)
	}
	return append(dst, ']')
}

// appendNegOpen appends ["NEG-OPEN",<id>,<filter>,<hex msg>] (NIP-77).
func appendNegOpen(dst []byte, id string, f *nostr.Filter, msg []byte) []byte {
	dst = appendLabel(dst, nostr.MsgNegOpen.String())
	dst = nostr.AppendString(dst, id)
	dst = append(dst, ',')
	dst = nostr.AppendFilter(dst, f)
	dst = append(dst, `,"`...)
	dst = hex.AppendEncode(dst, msg)
	return append(dst, `"]`...)
}

// appendLabel appends `["<label>",`; labels are plain ASCII.
func appendLabel(dst []byte, label string) []byte {
	dst = append(dst, `["`...)
	dst = append(dst, label...)
	return append(dst, `",`...)
}
