package relay

// NIP-42 authentication, the read protection of direct messages built on
// it, and the NIP-70 write rule.
//
// A session's authentication state is an immutable authInfo behind an
// atomic pointer: the message handler (the only writer) replaces it, and
// the dispatcher and the query workers read it without a lock. A session
// that never needs a challenge never allocates one.

import (
	"crypto/rand"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// authInfo is one state of a session's NIP-42 authentication. It is never
// modified once published: a change publishes a new one.
type authInfo struct {
	challenge string // "" until needed
	sent      bool   // the challenge was queued for the client
	pubkeys   []nostr.PubKey
	hexes     []string // pubkeys in lower-case hex, for "#p" comparisons
}

// authState is a session's NIP-42 state. Only the session's message
// handler changes it; anyone may read it.
type authState struct {
	p atomic.Pointer[authInfo]
}

func (a *authState) load() *authInfo { return a.p.Load() }

// authed reports whether at least one pubkey authenticated.
func (i *authInfo) authed() bool { return i != nil && len(i.pubkeys) > 0 }

// has reports whether pk authenticated.
func (i *authInfo) has(pk *nostr.PubKey) bool {
	if i == nil {
		return false
	}
	for k := range i.pubkeys {
		if i.pubkeys[k] == *pk {
			return true
		}
	}
	return false
}

// hasHex reports whether the hex pubkey v authenticated.
func (i *authInfo) hasHex(v string) bool {
	return i != nil && slices.Contains(i.hexes, v)
}

// mayRead reports whether an event of a protected kind, by author and
// with tags, may be served: the author or a "p"-tagged recipient
// authenticated.
func (i *authInfo) mayRead(author *nostr.PubKey, tags nostr.Tags) bool {
	if !i.authed() {
		return false
	}
	if i.has(author) {
		return true
	}
	for _, t := range tags {
		if len(t) >= 2 && t[0] == "p" && i.hasHex(t[1]) {
			return true
		}
	}
	return false
}

// AuthedPubKeys returns the pubkeys that authenticated on this connection
// (NIP-42), in order. The caller owns the returned slice.
func (s *Session) AuthedPubKeys() []nostr.PubKey {
	if i := s.auth.load(); i != nil {
		return slices.Clone(i.pubkeys)
	}
	return nil
}

// challenge returns the connection's NIP-42 challenge, creating it on
// first use (128 random bits from crypto/rand), and when send is set
// queues the AUTH message carrying it unless that was done before. It is
// called only from the session's message handler (and from onOpen, before
// any message).
func (s *Session) challenge(send bool) string {
	old := s.auth.load()
	if old != nil && old.challenge != "" && (!send || old.sent) {
		return old.challenge
	}
	n := &authInfo{}
	if old != nil {
		*n = *old
	}
	if n.challenge == "" {
		n.challenge = rand.Text()
	}
	sendNow := send && !n.sent
	n.sent = n.sent || send
	if !s.auth.p.CompareAndSwap(old, n) {
		// Only the handler writes: a lost race is a bug, but retrying
		// is still correct.
		return s.challenge(send)
	}
	if sendNow {
		s.sendControl(func(b []byte) []byte { return nostr.AppendAuthChallenge(b, n.challenge) })
	}
	return n.challenge
}

// authRequired sends the challenge (if not sent yet) and returns an
// "auth-required:" rejection with text.
func (s *Session) authRequired(text string) *nostr.Rejection {
	s.challenge(true)
	return nostr.Reject(nostr.PrefixAuthRequired, text)
}

// onOpen runs when a session starts, before any message: it refuses a
// blocked address and sends the AUTH challenge when configured to.
func (r *Relay) onOpen(s *Session) {
	if rej := r.pol.lists.CheckIP(s.addr); rej != nil {
		r.stats.ConnectionsBlocked.Add(1)
		r.stats.Notices.Add(1)
		r.stats.MessagesOut.Add(1)
		// Written straight to the transport: nothing else is queued yet,
		// and the close that follows would overtake a queued NOTICE.
		msg := nostr.AppendNotice(nil, rej.Error())
		_ = s.t.Write(append(appendWSHeader(make([]byte, 0, len(msg)+4), opText, len(msg)), msg...))
		s.close(ClosePolicy, rej.Error())
		return
	}
	if r.cfg.AuthOnConnect {
		s.challenge(true)
	}
}

// handleAuth answers an AUTH message (NIP-42) with OK.
func (s *Session) handleAuth(ev *nostr.Event) {
	r := s.r
	if rej := s.authenticate(ev); rej != nil {
		r.stats.AuthRejected.Add(1)
		s.ok(ev.ID, false, rej.Error())
		return
	}
	r.stats.AuthAccepted.Add(1)
	s.ok(ev.ID, true, "")
}

// authenticate checks an AUTH event, cheapest checks first, and adds its
// pubkey to the session's authenticated pubkeys. The signature is
// verified inline: AUTH is rare, and a client's later messages must see
// its outcome.
func (s *Session) authenticate(ev *nostr.Event) *nostr.Rejection {
	r := s.r
	if ev.Kind != nostr.KindClientAuth {
		return nostr.Reject(nostr.PrefixInvalid, "AUTH event must be of kind 22242")
	}
	now := r.now().Unix()
	if w := int64(r.cfg.AuthWindow / time.Second); ev.CreatedAt > now+w || ev.CreatedAt < now-w {
		return nostr.Reject(nostr.PrefixInvalid, "AUTH event created_at is more than "+r.cfg.AuthWindow.String()+" from now")
	}
	info := s.auth.load()
	if info == nil || !info.sent {
		// The client cannot know a challenge it was never sent.
		s.challenge(true)
		return nostr.Reject(nostr.PrefixInvalid, "no challenge had been sent on this connection; sign the one just sent")
	}
	if t, ok := ev.Tags.First("challenge"); !ok || t[1] != info.challenge {
		return nostr.Reject(nostr.PrefixInvalid, "challenge tag does not match the challenge of this connection")
	}
	if t, ok := ev.Tags.First("relay"); !ok || !r.own.Names(t[1]) {
		return nostr.Reject(nostr.PrefixInvalid, "relay tag does not name this relay")
	}
	if !nostr.CheckID(ev) {
		return nostr.Reject(nostr.PrefixInvalid, "event id does not match its content")
	}
	known := info.has(&ev.PubKey)
	if !known && len(info.pubkeys) >= r.cfg.MaxAuthPubKeys {
		r.stats.LimitTrips[limAuthPubKeys].Add(1)
		return nostr.Reject(nostr.PrefixRestricted, "too many pubkeys authenticated on this connection (max "+itoa(r.cfg.MaxAuthPubKeys)+")")
	}
	if !nostr.VerifyEvent(r.verifier, ev) {
		return nostr.Reject(nostr.PrefixInvalid, "bad signature")
	}
	if known {
		return nil
	}
	n := *info
	n.pubkeys = append(slices.Clip(info.pubkeys), ev.PubKey)
	n.hexes = append(slices.Clip(info.hexes), ev.PubKey.Hex())
	if !s.auth.p.CompareAndSwap(info, &n) {
		return s.authenticate(ev) // see challenge: cannot happen
	}
	return nil
}

// policy returns the decision of the cheap write checks on ev (nil:
// accept so far), in this order: kind 22242, the per-address EVENT rate
// limit, requests to vanish (which skip the rest: NIP-62 applies whatever
// the user's status), NIP-13 proof of work, Config.AuthRequired, NIP-70
// protected events, reposts embedding a protected event, and the write
// lists. It runs on the message handler before signature verification;
// the per-pubkey rate limit and the plugin run after it (ingest.go). It
// takes no lock and allocates only to refuse when the features are off.
func (s *Session) policy(ev *nostr.Event) *nostr.Rejection {
	r := s.r
	if ev.Kind == nostr.KindClientAuth {
		return nostr.Reject(nostr.PrefixInvalid, "kind 22242 events are sent with AUTH, not EVENT")
	}
	if l := r.pol.limEventIP.Load(); l != nil {
		if rej := l.AllowEvent(s.addr, ev.PubKey); rej != nil {
			r.stats.LimitTrips[limEventRateIP].Add(1)
			return rej
		}
	}
	if ev.Kind == nostr.KindRequestToVanish {
		return r.checkVanish(ev)
	}
	if d := int(r.pol.minPoW.Load()); d > 0 {
		if rej := checkPoW(ev, d); rej != nil {
			return rej
		}
	}
	if r.live.Load().AuthRequired && !s.auth.load().authed() {
		return s.authRequired("this relay accepts events from authenticated clients only")
	}
	if ev.IsProtected() {
		info := s.auth.load()
		switch {
		case !info.authed():
			return s.authRequired("this event may only be published by its author (NIP-70)")
		case !info.has(&ev.PubKey):
			return nostr.Reject(nostr.PrefixRestricted, "this event may only be published by its author (NIP-70)")
		}
	}
	if (ev.Kind == nostr.KindRepost || ev.Kind == nostr.KindGenericRepost) && embedsProtected(ev.Content) {
		return nostr.Reject(nostr.PrefixBlocked, "a repost must not embed a protected event (NIP-70)")
	}
	return r.pol.lists.CheckEvent(ev)
}

// embedsProtected reports whether content (a repost's) is a JSON event
// carrying the NIP-70 ["-"] tag. An object that is not a well-formed event
// is still looked at for such a tag.
func embedsProtected(content string) bool {
	c := strings.TrimSpace(content)
	if len(c) < 2 || c[0] != '{' {
		return false
	}
	if !strings.Contains(c, `"-"`) && !strings.Contains(c, `\u002d`) && !strings.Contains(c, `\u002D`) {
		return false // cannot hold a "-" string
	}
	if ev, err := nostr.ParseEvent([]byte(c), nil); err == nil {
		return ev.IsProtected()
	}
	var v struct {
		Tags []json.RawMessage `json:"tags"`
	}
	if json.Unmarshal([]byte(c), &v) != nil {
		return false
	}
	for _, raw := range v.Tags {
		var t []string
		if json.Unmarshal(raw, &t) == nil && len(t) == 1 && t[0] == "-" {
			return true
		}
	}
	return false
}

// Read protection.

// kindBits is a set of event kinds.
type kindBits [(nostr.MaxKind + 1) / 64]uint64

func (k *kindBits) has(kind int) bool {
	return uint(kind) <= nostr.MaxKind && k[kind>>6]&(1<<(kind&63)) != 0
}

// protectedText names the protected kinds for messages ("4, 14 and 1059").
func protectedText(kinds []int) string {
	var b strings.Builder
	for i, k := range kinds {
		switch {
		case i == 0:
		case i == len(kinds)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(k))
	}
	return b.String()
}

// canSee reports whether a live event may be delivered to this session:
// an event of a protected kind goes only to its authenticated author or
// "p"-tagged recipients. Called by the dispatcher for every matching
// subscription; it neither locks nor allocates.
func (s *Session) canSee(ev *nostr.Event) bool {
	p := s.r.pol.prot
	if p == nil || !p.has(ev.Kind) {
		return true
	}
	return s.auth.load().mayRead(&ev.PubKey, ev.Tags)
}

// canSeeRecord is canSee for a stored event. The event JSON is parsed
// only for a protected kind read by an authenticated client who is not
// its author.
func (s *Session) canSeeRecord(rec *store.Record) bool {
	p := s.r.pol.prot
	if p == nil || !p.has(rec.Kind) {
		return true
	}
	info := s.auth.load()
	if !info.authed() {
		return false
	}
	if info.has(&rec.PubKey) {
		return true
	}
	ev, err := nostr.ParseEvent(rec.Raw, nil)
	if err != nil {
		return false
	}
	return info.mayRead(&ev.PubKey, ev.Tags)
}

// namesProtected reports whether a filter asks explicitly for a protected
// kind.
func (r *Relay) namesProtected(filters []nostr.Filter) bool {
	if r.pol.prot == nil {
		return false
	}
	for i := range filters {
		for _, k := range filters[i].Kinds {
			if r.pol.prot.has(k) {
				return true
			}
		}
	}
	return false
}

// mayMatchProtected reports whether f can match an event of a protected
// kind: it has no kinds constraint, or names one.
func (r *Relay) mayMatchProtected(f *nostr.Filter) bool {
	if r.pol.prot == nil || f.Empty() {
		return false
	}
	if !f.HasKinds() {
		return true
	}
	for _, k := range f.Kinds {
		if r.pol.prot.has(k) {
			return true
		}
	}
	return false
}

// allVisible reports whether every protected event f matches is visible
// to info: f's authors are all authenticated, or so are all its "#p"
// values.
func (i *authInfo) allVisible(f *nostr.Filter) bool {
	if !i.authed() {
		return false
	}
	if len(f.Authors) > 0 {
		all := true
		for k := range f.Authors {
			if !i.has(&f.Authors[k]) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	if t := tagCond(f, 'p'); t != nil && len(t.Values) > 0 {
		for _, v := range t.Values {
			if !i.hasHex(v) {
				return false
			}
		}
		return true
	}
	return false
}

// tagCond returns f's "#name" condition, or nil.
func tagCond(f *nostr.Filter, name byte) *nostr.TagFilter {
	for i := range f.Tags {
		if f.Tags[i].Name == name {
			return &f.Tags[i]
		}
	}
	return nil
}

// checkReq returns the rejection of a REQ or COUNT that may not run at
// all: without authentication when Config.AuthRequired, or when a filter
// names a protected kind. Kind-less filters are served with the protected
// events the client may not see left out (canSee, canSeeRecord, COUNT's
// arithmetic). The AUTH challenge is sent before an "auth-required:".
func (s *Session) checkReq(filters []nostr.Filter) *nostr.Rejection {
	r := s.r
	authRequired := r.live.Load().AuthRequired
	if !authRequired && r.pol.prot == nil {
		return nil
	}
	info := s.auth.load()
	if info.authed() {
		return nil
	}
	if authRequired {
		return s.authRequired("this relay serves authenticated clients only")
	}
	if r.namesProtected(filters) {
		return s.authRequired("kinds " + r.pol.protText + " are served only to their authenticated author or recipients")
	}
	return nil
}

// checkRead returns the rejection of a NIP-77 negentropy read
// (NEG-OPEN): the per-address REQ rate limit, then checkReq. What the
// client may not see is left out of its items by negRelay.hidden.
// Refusals are counted in Stats.ReqRefused.
func (s *Session) checkRead(filters []nostr.Filter) *nostr.Rejection {
	rej := s.allowReq()
	if rej == nil {
		rej = s.checkReq(filters)
	}
	if rej != nil {
		s.r.stats.ReqRefused[reasonIndex(rej.Prefix)].Add(1)
	}
	return rej
}
