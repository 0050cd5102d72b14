package policy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// This file holds strfry's write-policy plugin protocol: the request line
// written for each event, the answer line read back, the actions and the
// decisions they make, and the line framing of the pipes. Nothing here
// touches a process or a Plugin.

// Action is a write-policy plugin's verdict on one event.
type Action uint8

// Actions, as strfry names them.
const (
	// Accept lets the event through the plugin; checks the caller makes
	// after the plugin still apply.
	Accept Action = iota + 1
	// Reject refuses the event with Decision.Msg.
	Reject
	// ShadowReject tells the client the event was accepted (OK true) but
	// neither stores nor broadcasts it.
	ShadowReject
)

// actionNames are the actions' names in the plugin protocol.
var actionNames = [...]string{Accept: "accept", Reject: "reject", ShadowReject: "shadowReject"}

// String returns the action's name in the plugin protocol.
func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// parseAction returns the action named name in the plugin protocol.
func parseAction(name string) (Action, bool) {
	for a, n := range actionNames {
		if n != "" && n == name {
			return Action(a), true
		}
	}
	return 0, false
}

// Decision is a plugin's answer for one event.
type Decision struct {
	Action Action
	// Msg is the message the plugin gave (strfry: "only used for reject"),
	// or the relay's own "error: ..." message when the plugin failed to
	// answer. It may be empty and may lack a NIP-01 prefix; use Rejection
	// for what to send.
	Msg string
}

// Rejection returns the OK-false message for a Reject: Msg itself if it
// starts with a NIP-01 prefix ("blocked: no spam"), else Msg under
// "blocked:" ("blocked: rejected by the relay's write policy" if Msg is
// empty). It returns nil for Accept and ShadowReject.
func (d Decision) Rejection() *nostr.Rejection {
	if d.Action != Reject {
		return nil
	}
	if p, text, ok := strings.Cut(d.Msg, ":"); ok {
		switch pr := nostr.Prefix(p); pr {
		case nostr.PrefixDuplicate, nostr.PrefixPoW, nostr.PrefixBlocked, nostr.PrefixRateLimited,
			nostr.PrefixInvalid, nostr.PrefixRestricted, nostr.PrefixMute, nostr.PrefixError,
			nostr.PrefixAuthRequired:
			return nostr.Reject(pr, strings.TrimPrefix(text, " "))
		}
	}
	if d.Msg == "" {
		return nostr.Reject(nostr.PrefixBlocked, "rejected by the relay's write policy")
	}
	return nostr.Reject(nostr.PrefixBlocked, d.Msg)
}

// SourceType says where an event came from: strfry's sourceType.
type SourceType string

// Source types. Events from clients are IP4 or IP6.
const (
	SourceIP4    SourceType = "IP4"
	SourceIP6    SourceType = "IP6"
	SourceImport SourceType = "Import"
	SourceStream SourceType = "Stream"
	SourceSync   SourceType = "Sync"
	SourceStored SourceType = "Stored"
)

// Meta is what the plugin is told about an event besides the event.
type Meta struct {
	// ReceivedAt is when the relay received the event; zero means now.
	ReceivedAt time.Time
	// SourceType is the channel the event came from.
	SourceType SourceType
	// SourceInfo is the client's address for IP4/IP6, or a relay URL or
	// file name for the others.
	SourceInfo string
	// Authed is the pubkey the connection authenticated as (NIP-42), or
	// the zero key if none. petrel adds it as "authed" (hex, or "").
	Authed nostr.PubKey
}

// MetaFromIP returns the Meta of an event received from a client at ip,
// authenticated as authed (zero: not authenticated).
func MetaFromIP(ip netip.Addr, authed nostr.PubKey) Meta {
	ip = ip.Unmap()
	st := SourceIP6
	if ip.Is4() {
		st = SourceIP4
	}
	return Meta{SourceType: st, SourceInfo: ip.WithZone("").String(), Authed: authed}
}

// appendRequest appends the plugin protocol's input line for ev:
//
//	{"type":"new","event":{...},"receivedAt":<unix s>,"sourceType":"IP4","sourceInfo":"<ip>","authed":"<hex or empty>"}
func appendRequest(dst []byte, ev *nostr.Event, m Meta) []byte {
	dst = append(dst, `{"type":"new","event":`...)
	raw := ev.Raw
	switch {
	case len(raw) == 0:
		dst = nostr.AppendEvent(dst, ev)
	case bytes.ContainsAny(raw, "\r\n"):
		// Whitespace between tokens would break the line protocol.
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			dst = nostr.AppendEvent(dst, ev)
		} else {
			dst = append(dst, b.Bytes()...)
		}
	default:
		dst = append(dst, raw...)
	}
	at := m.ReceivedAt
	if at.IsZero() {
		at = time.Now()
	}
	dst = append(dst, `,"receivedAt":`...)
	dst = strconv.AppendInt(dst, at.Unix(), 10)
	st := m.SourceType
	if st == "" {
		st = SourceIP4
	}
	dst = append(dst, `,"sourceType":`...)
	dst = nostr.AppendString(dst, strings.ToValidUTF8(string(st), "\uFFFD"))
	dst = append(dst, `,"sourceInfo":`...)
	dst = nostr.AppendString(dst, strings.ToValidUTF8(m.SourceInfo, "\uFFFD"))
	dst = append(dst, `,"authed":"`...)
	if m.Authed != (nostr.PubKey{}) {
		dst = append(dst, m.Authed.Hex()...)
	}
	return append(dst, "\"}\n"...)
}

// answer is one output line of the plugin protocol.
type answer struct {
	ID     nostr.ID
	Action Action
	Msg    string
}

// Errors of parseAnswer.
var (
	errAnswerSyntax = errors.New("policy: plugin answer is not a JSON object with an event id")
	errAnswerAction = errors.New("policy: plugin answer has an unknown action")
)

// parseAnswer parses one output line. With errAnswerAction the id is
// valid (the answer belongs to a request); with errAnswerSyntax it is not.
func parseAnswer(line []byte) (answer, error) {
	var a struct {
		ID     string          `json:"id"`
		Action string          `json:"action"`
		Msg    json.RawMessage `json:"msg"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return answer{}, fmt.Errorf("%w: %v", errAnswerSyntax, err)
	}
	id, err := nostr.ParseID(strings.ToLower(a.ID))
	if err != nil {
		return answer{}, fmt.Errorf("%w: id %q", errAnswerSyntax, a.ID)
	}
	out := answer{ID: id}
	if len(a.Msg) > 0 && string(a.Msg) != "null" {
		if err := json.Unmarshal(a.Msg, &out.Msg); err != nil {
			return out, fmt.Errorf("%w: msg is not a string", errAnswerAction)
		}
	}
	act, ok := parseAction(a.Action)
	if !ok {
		return out, fmt.Errorf("%w: %q", errAnswerAction, a.Action)
	}
	out.Action = act
	return out, nil
}

// readLine returns the next line of br without its line ending. A line
// longer than br's buffer is returned cut to the buffer's size with long
// set, and the rest of it is skipped. err is set at the end of input (a
// last line without a newline is returned with it).
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	line, err = br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		line = append([]byte(nil), line...)
		long = true
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
	}
	line = bytes.TrimRight(line, "\r\n")
	if err == io.EOF && len(line) == 0 {
		return nil, long, err
	}
	return line, long, err
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
