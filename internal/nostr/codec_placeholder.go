package nostr

// PLACEHOLDER: a slow, lenient encoding/json-based codec so that other
// packages can build against the API while the single-pass codec is being
// written. The codec work replaces this file entirely.

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// ParseEvent parses one event JSON object. The returned event's Raw is a
// private copy of data; data may be reused by the caller.
func ParseEvent(data []byte, lim *Limits) (*Event, error) {
	var w struct {
		ID        string     `json:"id"`
		PubKey    string     `json:"pubkey"`
		CreatedAt int64      `json:"created_at"`
		Kind      int        `json:"kind"`
		Tags      [][]string `json:"tags"`
		Content   string     `json:"content"`
		Sig       string     `json:"sig"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, &ParseError{Msg: err.Error()}
	}
	ev := &Event{CreatedAt: w.CreatedAt, Kind: w.Kind, Content: w.Content}
	var err error
	if ev.ID, err = ParseID(w.ID); err != nil {
		return nil, &ParseError{Msg: "bad id"}
	}
	if ev.PubKey, err = ParsePubKey(w.PubKey); err != nil {
		return nil, &ParseError{Msg: "bad pubkey"}
	}
	if ev.Sig, err = ParseSig(w.Sig); err != nil {
		return nil, &ParseError{Msg: "bad sig"}
	}
	ev.Tags = make(Tags, len(w.Tags))
	for i, t := range w.Tags {
		ev.Tags[i] = Tag(t)
	}
	ev.Raw = append([]byte(nil), data...)
	return ev, nil
}

// AppendCanonical appends the NIP-01 canonical serialization of ev
// ([0,pubkey,created_at,kind,tags,content]) to dst.
func AppendCanonical(dst []byte, ev *Event) []byte {
	dst = append(dst, `[0,"`...)
	dst = append(dst, ev.PubKey.Hex()...)
	dst = append(dst, `",`...)
	dst = strconv.AppendInt(dst, ev.CreatedAt, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, ',')
	dst = appendTags(dst, ev.Tags)
	dst = append(dst, ',')
	dst = AppendString(dst, ev.Content)
	return append(dst, ']')
}

func appendTags(dst []byte, tags Tags) []byte {
	dst = append(dst, '[')
	for i, t := range tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, s := range t {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, s)
		}
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// AppendString appends s as a JSON string with NIP-01 escaping: \n \" \\ \r
// \t \b \f escaped, other control characters as \u00XX, everything else
// verbatim.
func AppendString(dst []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&15])
			} else {
				dst = append(dst, c)
			}
		}
	}
	_ = utf8.RuneError
	return append(dst, '"')
}

// ComputeID returns the sha256 of the event's canonical serialization.
func ComputeID(ev *Event) ID {
	return sha256.Sum256(AppendCanonical(nil, ev))
}

// CheckID reports whether ev.ID is the hash of its canonical serialization.
func CheckID(ev *Event) bool { return ComputeID(ev) == ev.ID }

// Serialize returns the event as a compact JSON object in the conventional
// key order (id, pubkey, created_at, kind, tags, content, sig).
func Serialize(ev *Event) []byte { return AppendEvent(nil, ev) }

// AppendEvent appends the event as a compact JSON object.
func AppendEvent(dst []byte, ev *Event) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, ev.ID.Hex()...)
	dst = append(dst, `","pubkey":"`...)
	dst = append(dst, ev.PubKey.Hex()...)
	dst = append(dst, `","created_at":`...)
	dst = strconv.AppendInt(dst, ev.CreatedAt, 10)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, `,"tags":`...)
	dst = appendTags(dst, ev.Tags)
	dst = append(dst, `,"content":`...)
	dst = AppendString(dst, ev.Content)
	dst = append(dst, `,"sig":"`...)
	dst = append(dst, ev.Sig.Hex()...)
	return append(dst, `"}`...)
}
