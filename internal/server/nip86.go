package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/petrel-relay/petrel/internal/nip98"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/suggest"
)

// NIP86ContentType is the Content-Type of NIP-86 requests. The router sends
// a POST to the relay's WebSocket URI with this type to the NIP-86 handler.
const NIP86ContentType = "application/nostr+json+rpc"

// maxHTTPRequest bounds what the relay reads of one HTTP request: nbio
// buffers a request whole before its handler runs, its head with a
// Content-Length body (ReadLimit) and a chunked body (MaxHTTPBodySize),
// and bounds neither by default more tightly than 64 MiB and nothing
// respectively. The largest request the relay serves is a NIP-86 call (a
// body of at most nip86MaxBody, answered 413 up to this bound, and a
// NIP-98 Authorization header); past it nbio closes the connection.
const maxHTTPRequest = 4 * nip86MaxBody

// NIP-86 limits.
const (
	nip86MaxBody    = 64 << 10 // request body bytes
	nip86MaxAuth    = 16 << 10 // Authorization header bytes
	nip86AuthWindow = 60       // seconds created_at may differ from now (NIP-98's suggestion)
	nip86MaxTokens  = 4096     // accepted tokens remembered within their window (replays)
	nip86MaxName    = 256      // bytes of a relay name
	nip86MaxText    = 8192     // bytes of a description or icon URL
)

// NIP86Deps are what the NIP-86 management API reads and changes.
type NIP86Deps struct {
	// Lists holds the write lists the ban/allow/block methods change.
	// Required.
	Lists *policy.Lists
	// Admins are the pubkeys allowed to call the API. Empty: every request
	// is refused with 401.
	Admins []nostr.PubKey
	// URL is the relay's public URL, in its ws(s):// or http(s):// form.
	// The NIP-98 "u" tag must name it by the rule the relay applies to
	// its "relay" tags (nostr.OwnURL.Names): ws and http are one scheme,
	// as are wss and https; the case of scheme and host, a default port
	// and trailing slashes do not matter; the rest of the path and the
	// query do. If URL is empty, the URL of the request itself is used,
	// but only when its host is a loopback address: a public relay must
	// configure its URL.
	URL string
	// ChangeInfo sets one field of the relay's NIP-11 information and
	// persists it (Relay.ChangeInfo: one change at a time, so that two
	// at once both stay). If nil, changerelayname, changerelaydescription
	// and changerelayicon are not offered.
	ChangeInfo func(field relay.InfoField, value string) error
	// DeleteEvent removes a stored event; banevent calls it after the ban
	// is saved. Nil: banevent only bans.
	DeleteEvent func(ctx context.Context, id nostr.ID) error
	// Verifier checks the NIP-98 signature. Nil: nostr.DefaultVerifier().
	Verifier nostr.Verifier
	// Now is the clock for the created_at window. Nil: time.Now.
	Now func() time.Time
	// Logger receives an audit line per successful change. Nil:
	// slog.Default().
	Logger *slog.Logger
	// OnChange, if set, is called after each successful change with the
	// method's name (after its audit line), on the request's goroutine.
	OnChange func(method string)
}

// nip86Handler serves NIP-86. It is safe for concurrent use.
type nip86Handler struct {
	d       NIP86Deps
	admins  map[nostr.PubKey]bool
	wantURL nostr.OwnURL // d.URL; "" if not configured
	methods map[string]nip86Method
	names   []string       // supported methods, in documentation order
	used    *nip98.Replays // accepted tokens, until their window ends
}

// nip86Method runs one method for an authenticated admin.
type nip86Method func(ctx context.Context, admin nostr.PubKey, params []json.RawMessage) (any, error)

// NewNIP86Handler returns the NIP-86 relay management API: an http.Handler
// taking POST requests of type application/nostr+json+rpc whose body is
// {"method": ..., "params": [...]} and answering {"result": ...} or
// {"result": null, "error": "..."}.
//
// Every request must carry a NIP-98 Authorization header ("Nostr " and a
// base64 kind-27235 event) with created_at within 60s of now, a "u" tag
// naming the relay's URL, a "method" tag of POST, a "payload" tag with the
// SHA-256 of the body in hex (required by NIP-86), a valid id and
// signature, and a pubkey among d.Admins, and it must not have been
// accepted before: a token (the event's signature, see nip98.Replays) is
// remembered until its window ends, so a captured header cannot be
// replayed. Anything else is answered 401 with {"error": "..."}. At most
// 4,096 tokens are remembered; past that, new ones are answered 429
// until the oldest expire.
// OPTIONS requests get the CORS preflight answer.
//
// Methods: supportedmethods (which lists the others), banpubkey, unbanpubkey, listbannedpubkeys,
// allowpubkey, unallowpubkey, listallowedpubkeys, banevent, unbanevent,
// allowevent, unallowevent, listbannedevents, listallowedevents,
// changerelayname, changerelaydescription, changerelayicon, allowkind,
// disallowkind, listallowedkinds, listdisallowedkinds, blockip, unblockip,
// listblockedips. The role and moderation-queue methods of NIP-86 are not
// offered.
func NewNIP86Handler(d NIP86Deps) http.Handler {
	if d.Lists == nil {
		panic("BUG: server: NewNIP86Handler needs Lists")
	}
	if d.Verifier == nil {
		d.Verifier = nostr.DefaultVerifier()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	h := &nip86Handler{d: d, admins: make(map[nostr.PubKey]bool), used: nip98.NewReplays(nip86MaxTokens)}
	for _, pk := range d.Admins {
		h.admins[pk] = true
	}
	// An invalid d.URL is left unset: the relay refuses to start with one.
	h.wantURL, _ = nostr.ParseOwnURL(d.URL)
	h.register()
	return h
}

// nip86Response is the response body.
type nip86Response struct {
	Result any    `json:"result"`
	Error  string `json:"error,omitempty"`
}

func nip86CORS(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Access-Control-Allow-Origin", "*")
	// "*" does not cover Authorization in the Fetch standard: name it.
	hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	hd.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
}

func writeNIP86(w http.ResponseWriter, status int, resp nip86Response) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Nostr")
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(resp)
	w.Write(append(b, '\n'))
}

func (h *nip86Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	nip86CORS(w)
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		writeNIP86(w, http.StatusMethodNotAllowed, nip86Response{Error: "NIP-86 requests are POSTs"})
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != NIP86ContentType {
		writeNIP86(w, http.StatusUnsupportedMediaType, nip86Response{Error: "Content-Type must be " + NIP86ContentType})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, nip86MaxBody+1))
	if err != nil {
		writeNIP86(w, http.StatusBadRequest, nip86Response{Error: "could not read the request body"})
		return
	}
	if len(body) > nip86MaxBody {
		writeNIP86(w, http.StatusRequestEntityTooLarge, nip86Response{Error: "request body larger than " + strconv.Itoa(nip86MaxBody) + " bytes"})
		return
	}
	admin, err := h.authorize(r, body)
	if errors.Is(err, nip98.ErrTooMany) {
		w.Header().Set("Retry-After", strconv.Itoa(nip86AuthWindow))
		writeNIP86(w, http.StatusTooManyRequests, nip86Response{Error: "rate-limited: too many NIP-98 tokens within 60s"})
		return
	}
	if err != nil {
		writeNIP86(w, http.StatusUnauthorized, nip86Response{Error: "unauthorized: " + err.Error()})
		return
	}
	var req struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Method == "" {
		writeNIP86(w, http.StatusBadRequest, nip86Response{Error: "the body must be {\"method\": ..., \"params\": [...]}"})
		return
	}
	m, ok := h.methods[req.Method]
	if !ok {
		msg := "unsupported method: " + req.Method
		if best := suggest.Closest(req.Method, slices.Sorted(maps.Keys(h.methods)), 2); best != "" {
			msg += " (did you mean " + best + "?)"
		}
		writeNIP86(w, http.StatusOK, nip86Response{Error: msg})
		return
	}
	result, err := m(r.Context(), admin, req.Params)
	if err != nil {
		writeNIP86(w, http.StatusOK, nip86Response{Error: strings.TrimPrefix(err.Error(), "policy: ")})
		return
	}
	writeNIP86(w, http.StatusOK, nip86Response{Result: result})
}

// authorize checks the NIP-98 header of r for body and returns the admin.
// The checks run cheapest first: the signature is verified only for an
// admin's pubkey.
func (h *nip86Handler) authorize(r *http.Request, body []byte) (nostr.PubKey, error) {
	var none nostr.PubKey
	ev, err := nip98.Parse(r.Header.Get("Authorization"), nip86MaxAuth)
	if err != nil {
		return none, err
	}
	now := h.d.Now().Unix()
	if d := now - ev.CreatedAt; d > nip86AuthWindow || d < -nip86AuthWindow {
		return none, errors.New("Authorization event created_at is more than 60s from now")
	}
	want := h.wantURL
	if want == "" {
		if want = nip86LoopbackURL(r); want == "" {
			return none, errors.New("the relay's public URL is not configured")
		}
	}
	if u, ok := ev.Tags.First("u"); !ok || !want.Names(u.Value()) {
		return none, errors.New("Authorization event u tag does not name this relay")
	}
	if m, ok := ev.Tags.First("method"); !ok || !strings.EqualFold(m.Value(), r.Method) {
		return none, errors.New("Authorization event method tag does not match the request")
	}
	sum := sha256.Sum256(body)
	if p, ok := ev.Tags.First("payload"); !ok || !strings.EqualFold(p.Value(), hex.EncodeToString(sum[:])) {
		return none, errors.New("Authorization event payload tag is not the SHA-256 of the body")
	}
	if !nostr.CheckID(ev) {
		return none, errors.New("Authorization event id does not match its content")
	}
	if !h.admins[ev.PubKey] {
		return none, errors.New("pubkey is not an admin of this relay")
	}
	if !nostr.VerifyEvent(h.d.Verifier, ev) {
		return none, errors.New("Authorization event signature is invalid")
	}
	switch err := h.used.Use(ev, ev.CreatedAt+nip86AuthWindow, now); {
	case errors.Is(err, nip98.ErrReplayed):
		return none, errors.New("Authorization event already used (sign a new one for each request)")
	case err != nil:
		return none, err
	}
	return ev.PubKey, nil
}

// nip86LoopbackURL returns the URL of r if its Host is a loopback
// address or localhost (nostr.IsLoopbackHost), else "".
func nip86LoopbackURL(r *http.Request) nostr.OwnURL {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !nostr.IsLoopbackHost(strings.Trim(host, "[]")) {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u, _ := nostr.NormalizeRelayURL(scheme + "://" + r.Host + r.URL.RequestURI())
	return nostr.OwnURL(u)
}

// Parameter helpers.

func nip86Param(params []json.RawMessage, i int, what string) (string, error) {
	if i >= len(params) {
		return "", fmt.Errorf("missing parameter %d: %s", i+1, what)
	}
	var s string
	if err := json.Unmarshal(params[i], &s); err != nil {
		return "", fmt.Errorf("parameter %d (%s) must be a string", i+1, what)
	}
	return s, nil
}

// nip86Reason returns the optional reason at params[i].
func nip86Reason(params []json.RawMessage, i int) (string, error) {
	if i >= len(params) || string(params[i]) == "null" {
		return "", nil
	}
	s, err := nip86Param(params, i, "reason")
	if len(s) > nip86MaxText {
		return "", fmt.Errorf("reason longer than %d bytes", nip86MaxText)
	}
	return s, err
}

func nip86PubKey(params []json.RawMessage) (nostr.PubKey, string, error) {
	s, err := nip86Param(params, 0, "32-byte hex public key")
	if err != nil {
		return nostr.PubKey{}, "", err
	}
	pk, err := nostr.ParsePubKey(strings.ToLower(s))
	if err != nil {
		return pk, "", fmt.Errorf("parameter 1 is not a 32-byte hex public key")
	}
	reason, err := nip86Reason(params, 1)
	return pk, reason, err
}

func nip86ID(params []json.RawMessage) (nostr.ID, string, error) {
	s, err := nip86Param(params, 0, "32-byte hex event id")
	if err != nil {
		return nostr.ID{}, "", err
	}
	id, err := nostr.ParseID(strings.ToLower(s))
	if err != nil {
		return id, "", fmt.Errorf("parameter 1 is not a 32-byte hex event id")
	}
	reason, err := nip86Reason(params, 1)
	return id, reason, err
}

// nip86Kind accepts a JSON number or a decimal string.
func nip86Kind(params []json.RawMessage) (int, error) {
	if len(params) == 0 {
		return 0, errors.New("missing parameter 1: kind number")
	}
	p := params[0]
	var k int
	if err := json.Unmarshal(p, &k); err != nil {
		var s string
		if json.Unmarshal(p, &s) != nil {
			return 0, errors.New("parameter 1 must be a kind number")
		}
		if k, err = strconv.Atoi(s); err != nil {
			return 0, errors.New("parameter 1 must be a kind number")
		}
	}
	if k < 0 || k > nostr.MaxKind {
		return 0, fmt.Errorf("kind %d is outside 0-%d", k, nostr.MaxKind)
	}
	return k, nil
}

// Results.

type nip86PubKeyItem struct {
	PubKey string `json:"pubkey"`
	Reason string `json:"reason,omitempty"`
}

type nip86EventItem struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

type nip86IPItem struct {
	IP     string `json:"ip"`
	Reason string `json:"reason,omitempty"`
}

func nip86PubKeyItems(list []policy.PubKeyEntry) []nip86PubKeyItem {
	out := make([]nip86PubKeyItem, len(list))
	for i, e := range list {
		out[i] = nip86PubKeyItem{PubKey: e.PubKey.Hex(), Reason: e.Reason}
	}
	return out
}

func nip86EventItems(list []policy.EventEntry) []nip86EventItem {
	out := make([]nip86EventItem, len(list))
	for i, e := range list {
		out[i] = nip86EventItem{ID: e.ID.Hex(), Reason: e.Reason}
	}
	return out
}

// register fills h.methods.
func (h *nip86Handler) register() {
	h.methods = make(map[string]nip86Method)
	add := func(name string, m nip86Method) {
		h.methods[name] = m
		h.names = append(h.names, name)
	}
	l := h.d.Lists
	audit := func(admin nostr.PubKey, method string, args ...any) {
		h.d.Logger.Info("nip86: "+method, append([]any{"admin", admin.Hex()}, args...)...)
		if h.d.OnChange != nil {
			h.d.OnChange(method)
		}
	}
	pkMethod := func(name string, do func(context.Context, nostr.PubKey, string) error) {
		add(name, func(ctx context.Context, admin nostr.PubKey, params []json.RawMessage) (any, error) {
			pk, reason, err := nip86PubKey(params)
			if err != nil {
				return nil, err
			}
			if err := do(ctx, pk, reason); err != nil {
				return nil, err
			}
			audit(admin, name, "pubkey", pk.Hex(), "reason", reason)
			return true, nil
		})
	}
	idMethod := func(name string, do func(context.Context, nostr.ID, string) error) {
		add(name, func(ctx context.Context, admin nostr.PubKey, params []json.RawMessage) (any, error) {
			id, reason, err := nip86ID(params)
			if err != nil {
				return nil, err
			}
			if err := do(ctx, id, reason); err != nil {
				return nil, err
			}
			audit(admin, name, "id", id.Hex(), "reason", reason)
			return true, nil
		})
	}
	list := func(name string, f func() any) {
		add(name, func(context.Context, nostr.PubKey, []json.RawMessage) (any, error) { return f(), nil })
	}

	// NIP-86: "an array with the names of all the other supported methods".
	h.methods["supportedmethods"] = func(context.Context, nostr.PubKey, []json.RawMessage) (any, error) {
		return h.names, nil
	}
	pkMethod("banpubkey", l.BanPubKey)
	pkMethod("unbanpubkey", func(ctx context.Context, pk nostr.PubKey, _ string) error { return l.UnbanPubKey(ctx, pk) })
	list("listbannedpubkeys", func() any { return nip86PubKeyItems(l.BannedPubKeys()) })
	pkMethod("allowpubkey", l.AllowPubKey)
	pkMethod("unallowpubkey", func(ctx context.Context, pk nostr.PubKey, _ string) error { return l.UnallowPubKey(ctx, pk) })
	list("listallowedpubkeys", func() any { return nip86PubKeyItems(l.AllowedPubKeys()) })
	idMethod("banevent", func(ctx context.Context, id nostr.ID, reason string) error {
		if err := l.BanEvent(ctx, id, reason); err != nil {
			return err
		}
		if h.d.DeleteEvent != nil {
			if err := h.d.DeleteEvent(ctx, id); err != nil {
				return fmt.Errorf("the event is banned, but deleting the stored copy failed: %v", err)
			}
		}
		return nil
	})
	idMethod("unbanevent", func(ctx context.Context, id nostr.ID, _ string) error { return l.UnbanEvent(ctx, id) })
	idMethod("allowevent", l.AllowEvent)
	idMethod("unallowevent", func(ctx context.Context, id nostr.ID, _ string) error { return l.UnallowEvent(ctx, id) })
	list("listbannedevents", func() any { return nip86EventItems(l.BannedEvents()) })
	list("listallowedevents", func() any { return nip86EventItems(l.AllowedEvents()) })

	if h.d.ChangeInfo != nil {
		info := func(name, what string, max int, field relay.InfoField) {
			add(name, func(_ context.Context, admin nostr.PubKey, params []json.RawMessage) (any, error) {
				v, err := nip86Param(params, 0, what)
				if err != nil {
					return nil, err
				}
				if len(v) > max {
					return nil, fmt.Errorf("%s longer than %d bytes", what, max)
				}
				if field == relay.InfoIcon && v != "" {
					if err := relay.WebURL(v); err != nil {
						return nil, fmt.Errorf("%s: %v", what, err)
					}
				}
				if err := h.d.ChangeInfo(field, v); err != nil {
					return nil, fmt.Errorf("could not save the relay information: %v", err)
				}
				audit(admin, name, "value", v)
				return true, nil
			})
		}
		info("changerelayname", "name", nip86MaxName, relay.InfoName)
		info("changerelaydescription", "description", nip86MaxText, relay.InfoDescription)
		info("changerelayicon", "icon URL", nip86MaxText, relay.InfoIcon)
	}

	kindMethod := func(name string, do func(context.Context, int) error) {
		add(name, func(ctx context.Context, admin nostr.PubKey, params []json.RawMessage) (any, error) {
			k, err := nip86Kind(params)
			if err != nil {
				return nil, err
			}
			if err := do(ctx, k); err != nil {
				return nil, err
			}
			audit(admin, name, "kind", k)
			return true, nil
		})
	}
	kindMethod("allowkind", l.AllowKind)
	kindMethod("disallowkind", l.DisallowKind)
	list("listallowedkinds", func() any { return l.AllowedKinds() })
	list("listdisallowedkinds", func() any { return l.DisallowedKinds() })

	add("blockip", func(ctx context.Context, admin nostr.PubKey, params []json.RawMessage) (any, error) {
		ip, err := nip86Param(params, 0, "IP address")
		if err != nil {
			return nil, err
		}
		reason, err := nip86Reason(params, 1)
		if err != nil {
			return nil, err
		}
		if err := l.BlockIP(ctx, ip, reason); err != nil {
			return nil, err
		}
		audit(admin, "blockip", "ip", ip, "reason", reason)
		return true, nil
	})
	add("unblockip", func(ctx context.Context, admin nostr.PubKey, params []json.RawMessage) (any, error) {
		ip, err := nip86Param(params, 0, "IP address")
		if err != nil {
			return nil, err
		}
		if err := l.UnblockIP(ctx, ip); err != nil {
			return nil, err
		}
		audit(admin, "unblockip", "ip", ip)
		return true, nil
	})
	list("listblockedips", func() any {
		entries := l.BlockedIPs()
		out := make([]nip86IPItem, len(entries))
		for i, e := range entries {
			out[i] = nip86IPItem{IP: e.String(), Reason: e.Reason}
		}
		return out
	})
}
