package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nip98"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
)

// nip86Env is a NIP-86 handler behind a real HTTP server.
type nip86Env struct {
	srv     *httptest.Server
	url     string // the relay's configured ws:// URL
	lists   *policy.Lists
	persist *policy.MemPersister
	admin   nostr.SecretKey
	now     time.Time
	handler *nip86Handler

	mu      sync.Mutex
	info    relay.Info
	deleted []nostr.ID
	delErr  error
}

func newNIP86Env(t *testing.T) *nip86Env {
	t.Helper()
	e := &nip86Env{
		persist: &policy.MemPersister{},
		admin:   nostr.SecretKeyFromSeed([]byte("nip86 admin")),
		now:     time.Unix(1750000000, 0),
		info:    relay.Info{Name: "petrel", Description: "old"},
	}
	var err error
	e.lists, err = policy.NewLists(context.Background(), policy.Config{BannedPubKeys: []string{nip86StaticBanned.Hex()}}, e.persist)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	e.url = "ws" + strings.TrimPrefix(e.srv.URL, "http")
	h = NewNIP86Handler(NIP86Deps{
		Lists:  e.lists,
		Admins: []nostr.PubKey{e.admin.PubKey()},
		URL:    e.url,
		ChangeInfo: func(field relay.InfoField, v string) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			*map[relay.InfoField]*string{relay.InfoName: &e.info.Name, relay.InfoDescription: &e.info.Description, relay.InfoIcon: &e.info.Icon}[field] = v
			return nil
		},
		DeleteEvent: func(_ context.Context, id nostr.ID) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.deleted = append(e.deleted, id)
			return e.delErr
		},
		Verifier: nostr.DefaultVerifier(),
		Now:      func() time.Time { return e.now },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	e.handler = h.(*nip86Handler)
	return e
}

var nip86StaticBanned = nostr.SecretKeyFromSeed([]byte("static banned")).PubKey()

// nip86AuthOpts changes the NIP-98 event of a request.
type nip86AuthOpts struct {
	signer  *nostr.SecretKey
	kind    int
	age     int64  // seconds before now
	u       string // "" = the relay's URL
	method  string // "" = POST
	payload string // "" = the body's hash; "-" = no payload tag
	tamper  func(*nostr.Event)
	header  string // replaces the whole Authorization header if set
}

func (e *nip86Env) authEvent(body []byte, o nip86AuthOpts) *nostr.Event {
	sk := e.admin
	if o.signer != nil {
		sk = *o.signer
	}
	kind := nostr.KindHTTPAuth
	if o.kind != 0 {
		kind = o.kind
	}
	u := e.url
	if o.u != "" {
		u = o.u
	}
	method := "POST"
	if o.method != "" {
		method = o.method
	}
	sum := sha256.Sum256(body)
	tags := nostr.Tags{{"u", u}, {"method", method}}
	switch o.payload {
	case "":
		tags = append(tags, nostr.Tag{"payload", hex.EncodeToString(sum[:])})
	case "-":
	default:
		tags = append(tags, nostr.Tag{"payload", o.payload})
	}
	ev := &nostr.Event{Kind: kind, CreatedAt: e.now.Unix() - o.age, Tags: tags}
	// A fresh signature per request, as nip98.Event makes: the handler
	// refuses a token used before.
	nostr.SignEvent(ev, sk)
	var aux [32]byte
	rand.Read(aux[:])
	ev.Sig = sk.SignAux((*[32]byte)(&ev.ID), &aux)
	ev.Raw = nostr.Serialize(ev)
	if o.tamper != nil {
		o.tamper(ev)
		ev.Raw = nostr.Serialize(ev)
	}
	return ev
}

func (e *nip86Env) post(t *testing.T, body []byte, o nip86AuthOpts) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", NIP86ContentType)
	switch {
	case o.header == "none":
	case o.header != "":
		req.Header.Set("Authorization", o.header)
	default:
		req.Header.Set("Authorization", "Nostr "+base64.StdEncoding.EncodeToString(e.authEvent(body, o).Raw))
	}
	return nip86Do(t, req)
}

func nip86Do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d: body is not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

// call runs a method as the admin and returns result and error fields.
func (e *nip86Env) call(t *testing.T, method string, params ...any) (any, string) {
	t.Helper()
	if params == nil {
		params = []any{}
	}
	body, _ := json.Marshal(map[string]any{"method": method, "params": params})
	status, out := e.post(t, body, nip86AuthOpts{})
	if status != http.StatusOK {
		t.Fatalf("%s: status %d %v", method, status, out)
	}
	errMsg, _ := out["error"].(string)
	return out["result"], errMsg
}

// ok runs a method that must succeed with result true.
func (e *nip86Env) ok(t *testing.T, method string, params ...any) {
	t.Helper()
	res, errMsg := e.call(t, method, params...)
	if errMsg != "" || res != true {
		t.Fatalf("%s %v: result %v, error %q", method, params, res, errMsg)
	}
}

// fails runs a method that must fail with an error containing want.
func (e *nip86Env) fails(t *testing.T, want, method string, params ...any) {
	t.Helper()
	res, errMsg := e.call(t, method, params...)
	if !strings.Contains(errMsg, want) || res != nil {
		t.Fatalf("%s %v: result %v, error %q; want error containing %q", method, params, res, errMsg, want)
	}
}

// list runs a list method and returns its result re-encoded as JSON.
func (e *nip86Env) list(t *testing.T, method string) string {
	t.Helper()
	res, errMsg := e.call(t, method)
	if errMsg != "" {
		t.Fatalf("%s: %s", method, errMsg)
	}
	b, _ := json.Marshal(res)
	return string(b)
}

func TestNIP86SupportedMethods(t *testing.T) {
	e := newNIP86Env(t)
	res, errMsg := e.call(t, "supportedmethods")
	if errMsg != "" {
		t.Fatal(errMsg)
	}
	var got []string
	for _, m := range res.([]any) {
		got = append(got, m.(string))
	}
	want := []string{"banpubkey", "unbanpubkey", "listbannedpubkeys", "allowpubkey", "unallowpubkey",
		"listallowedpubkeys", "banevent", "unbanevent", "allowevent", "unallowevent", "listbannedevents",
		"listallowedevents", "changerelayname", "changerelaydescription", "changerelayicon", "allowkind",
		"disallowkind", "listallowedkinds", "listdisallowedkinds", "blockip", "unblockip", "listblockedips"}
	if !slices.Equal(got, want) {
		t.Fatalf("methods %v", got)
	}
	e.fails(t, "unsupported method: createrole", "createrole", "x")
	// A mistyped method names the one probably meant.
	e.fails(t, "unsupported method: banpubky (did you mean banpubkey?)", "banpubky", "x")
	if _, msg := e.call(t, "createrole", "x"); strings.Contains(msg, "did you mean") {
		t.Fatalf("a method far from every one: %q", msg)
	}
}

func TestNIP86PubKeys(t *testing.T) {
	e := newNIP86Env(t)
	sk := nostr.SecretKeyFromSeed([]byte("someone"))
	pk := sk.PubKey()
	ev := &nostr.Event{Kind: 1, CreatedAt: 1, Tags: nostr.Tags{}}
	nostr.SignEvent(ev, sk)

	e.ok(t, "banpubkey", pk.Hex(), "spam")
	if e.lists.CheckEvent(ev) == nil {
		t.Fatal("ban not applied")
	}
	if got, want := e.list(t, "listbannedpubkeys"), `[{"pubkey":"`+min(pk.Hex(), nip86StaticBanned.Hex())+`"`; !strings.HasPrefix(got, want) || !strings.Contains(got, `"reason":"spam"`) {
		t.Fatalf("listbannedpubkeys %s", got)
	}
	e.ok(t, "unbanpubkey", pk.Hex())
	if e.lists.CheckEvent(ev) != nil {
		t.Fatal("unban not applied")
	}
	e.ok(t, "allowpubkey", strings.ToUpper(pk.Hex())) // hex in either case
	if got := e.list(t, "listallowedpubkeys"); got != `[{"pubkey":"`+pk.Hex()+`"}]` {
		t.Fatalf("listallowedpubkeys %s", got)
	}
	e.ok(t, "unallowpubkey", pk.Hex(), nil)
	if got := e.list(t, "listallowedpubkeys"); got != `[]` {
		t.Fatalf("listallowedpubkeys %s", got)
	}
	e.fails(t, "configuration file", "unbanpubkey", nip86StaticBanned.Hex())
	e.fails(t, "32-byte hex public key", "banpubkey", "abc")
	e.fails(t, "missing parameter 1", "banpubkey")
	e.fails(t, "must be a string", "banpubkey", 42)
	e.fails(t, "reason", "banpubkey", pk.Hex(), 7)
	// Every change was persisted.
	if _, err := e.persist.Load(context.Background(), policy.KeyAllowedPubKeys); err != nil {
		t.Fatal(err)
	}
}

func TestNIP86Events(t *testing.T) {
	e := newNIP86Env(t)
	ev := &nostr.Event{Kind: 1, CreatedAt: 1, Tags: nostr.Tags{}}
	nostr.SignEvent(ev, nostr.SecretKeyFromSeed([]byte("author")))
	id := ev.ID.Hex()

	e.ok(t, "banevent", id, "illegal")
	if e.lists.CheckEvent(ev) == nil {
		t.Fatal("event ban not applied")
	}
	if len(e.deleted) != 1 || e.deleted[0] != ev.ID {
		t.Fatalf("deleted %v", e.deleted)
	}
	if got := e.list(t, "listbannedevents"); got != `[{"id":"`+id+`","reason":"illegal"}]` {
		t.Fatalf("listbannedevents %s", got)
	}
	e.ok(t, "allowevent", id)
	if e.lists.CheckEvent(ev) != nil || e.list(t, "listbannedevents") != `[]` || e.list(t, "listallowedevents") != `[{"id":"`+id+`"}]` {
		t.Fatal("allowevent did not replace the ban")
	}
	e.ok(t, "unallowevent", id)
	e.ok(t, "banevent", id)
	e.ok(t, "unbanevent", id)
	if e.list(t, "listbannedevents") != `[]` || e.list(t, "listallowedevents") != `[]` {
		t.Fatal("lists not empty")
	}
	e.delErr = errors.New("disk on fire")
	e.fails(t, "deleting the stored copy failed", "banevent", id)
	if e.lists.CheckEvent(ev) == nil {
		t.Fatal("ban must hold even if the delete failed")
	}
	e.fails(t, "32-byte hex event id", "banevent", "zz")
}

func TestNIP86RelayInfo(t *testing.T) {
	e := newNIP86Env(t)
	e.ok(t, "changerelayname", "Petrel Prime")
	e.ok(t, "changerelaydescription", "a fast relay")
	e.ok(t, "changerelayicon", "https://example.com/icon.png")
	if e.info.Name != "Petrel Prime" || e.info.Description != "a fast relay" || e.info.Icon != "https://example.com/icon.png" {
		t.Fatalf("info %+v", e.info)
	}
	e.fails(t, "longer than", "changerelayname", strings.Repeat("x", 300))
	e.fails(t, "missing parameter", "changerelayicon")
	// The icon is a link clients load: an http(s) URL, or nothing.
	e.fails(t, `icon URL: "icon.png": want an http:// or https:// URL`, "changerelayicon", "icon.png")
	e.fails(t, "want an http:// or https:// URL", "changerelayicon", "javascript:alert(1)")
	if e.info.Icon != "https://example.com/icon.png" {
		t.Fatalf("a refused icon changed it: %q", e.info.Icon)
	}
	e.ok(t, "changerelayicon", "")
	if e.info.Icon != "" {
		t.Fatalf("icon not cleared: %q", e.info.Icon)
	}
}

func TestNIP86Kinds(t *testing.T) {
	e := newNIP86Env(t)
	e.ok(t, "allowkind", 1)
	e.ok(t, "allowkind", "30023") // a decimal string is accepted too
	e.ok(t, "disallowkind", 4)
	if got := e.list(t, "listallowedkinds"); got != `[1,30023]` {
		t.Fatalf("listallowedkinds %s", got)
	}
	if got := e.list(t, "listdisallowedkinds"); got != `[4]` {
		t.Fatalf("listdisallowedkinds %s", got)
	}
	e.ok(t, "disallowkind", 1)
	if got := e.list(t, "listallowedkinds"); got != `[30023]` {
		t.Fatalf("listallowedkinds %s", got)
	}
	e.fails(t, "outside", "allowkind", 70000)
	e.fails(t, "kind number", "allowkind", "one")
	e.fails(t, "missing parameter", "disallowkind")
}

func TestNIP86IPs(t *testing.T) {
	e := newNIP86Env(t)
	e.ok(t, "blockip", "203.0.113.7", "scanner")
	e.ok(t, "blockip", "2001:db8::/32")
	if e.lists.CheckIP(netip.MustParseAddr("2001:db8:5::1")) == nil || e.lists.CheckIP(netip.MustParseAddr("203.0.113.7")) == nil {
		t.Fatal("blocks not applied")
	}
	if got := e.list(t, "listblockedips"); got != `[{"ip":"203.0.113.7","reason":"scanner"},{"ip":"2001:db8::/32"}]` {
		t.Fatalf("listblockedips %s", got)
	}
	e.ok(t, "unblockip", "203.0.113.7")
	if e.lists.CheckIP(netip.MustParseAddr("203.0.113.7")) != nil {
		t.Fatal("unblock not applied")
	}
	e.fails(t, "invalid value", "blockip", "not an ip")
}

func TestNIP86Auth(t *testing.T) {
	e := newNIP86Env(t)
	body := []byte(`{"method":"listbannedpubkeys","params":[]}`)
	other := nostr.SecretKeyFromSeed([]byte("not an admin"))
	f := func(name string, o nip86AuthOpts, want string) {
		t.Helper()
		status, out := e.post(t, body, o)
		msg, _ := out["error"].(string)
		if status != http.StatusUnauthorized || !strings.Contains(msg, want) || out["result"] != nil {
			t.Fatalf("%s: status %d, body %v; want 401 with %q", name, status, out, want)
		}
	}
	f("no header", nip86AuthOpts{header: "none"}, "missing Authorization")
	f("other scheme", nip86AuthOpts{header: "Bearer abc"}, "scheme must be Nostr")
	f("not base64", nip86AuthOpts{header: "Nostr !!!"}, "not base64")
	f("not an event", nip86AuthOpts{header: "Nostr " + base64.StdEncoding.EncodeToString([]byte(`{"kind":1}`))}, "Authorization event")
	f("wrong kind", nip86AuthOpts{kind: 1}, "kind 1")
	f("stale", nip86AuthOpts{age: 61}, "60s")
	f("future", nip86AuthOpts{age: -61}, "60s")
	f("wrong u", nip86AuthOpts{u: "wss://other.example.com"}, "u tag")
	f("wrong u path", nip86AuthOpts{u: e.url + "/admin"}, "u tag")
	f("wrong u query", nip86AuthOpts{u: e.url + "?x=1"}, "u tag")
	f("opaque u", nip86AuthOpts{u: strings.Replace(e.url, "://", ":", 1)}, "u tag")
	f("wrong method", nip86AuthOpts{method: "GET"}, "method tag")
	f("wrong payload", nip86AuthOpts{payload: strings.Repeat("ab", 32)}, "payload tag")
	f("no payload", nip86AuthOpts{payload: "-"}, "payload tag")
	f("non-admin", nip86AuthOpts{signer: &other}, "not an admin")
	f("bad signature", nip86AuthOpts{tamper: func(ev *nostr.Event) { ev.Sig[5] ^= 1 }}, "signature")
	f("id mismatch", nip86AuthOpts{tamper: func(ev *nostr.Event) { ev.CreatedAt-- }}, "id does not match")
	f("impersonated admin", nip86AuthOpts{signer: &other, tamper: func(ev *nostr.Event) {
		ev.PubKey = e.admin.PubKey()
		ev.ID = nostr.ComputeID(ev)
	}}, "signature")

	// The accepted forms: the ws and http spellings of the URL, a small
	// clock skew.
	ok := func(o nip86AuthOpts) {
		t.Helper()
		if status, out := e.post(t, body, o); status != http.StatusOK || out["error"] != nil {
			t.Fatalf("%+v: status %d %v", o, status, out)
		}
	}
	ok(nip86AuthOpts{})
	ok(nip86AuthOpts{u: e.srv.URL})
	ok(nip86AuthOpts{u: e.srv.URL + "/"})
	ok(nip86AuthOpts{age: 59})
	ok(nip86AuthOpts{age: -59})
	ev := e.authEvent(body, nip86AuthOpts{age: 1})
	ok(nip86AuthOpts{header: "nostr " + base64.RawURLEncoding.EncodeToString(ev.Raw)})

	// A token accepted once is refused after, in any spelling, for the
	// rest of its window; a fresh token for the same call is accepted.
	f("replayed", nip86AuthOpts{header: "Nostr " + base64.StdEncoding.EncodeToString(ev.Raw)}, "already used")
	e.now = e.now.Add(59 * time.Second)
	f("replayed at the end of its window", nip86AuthOpts{header: "Nostr " + base64.StdEncoding.EncodeToString(ev.Raw)}, "already used")
	ok(nip86AuthOpts{})
	// A token refused for its signature is not remembered, so it does not
	// block the real one with the same id.
	good := e.authEvent(body, nip86AuthOpts{})
	bad := *good
	bad.Sig[3] ^= 1
	bad.Raw = nostr.Serialize(&bad)
	f("bad signature of a good id", nip86AuthOpts{header: "Nostr " + base64.StdEncoding.EncodeToString(bad.Raw)}, "signature")
	ok(nip86AuthOpts{header: "Nostr " + base64.StdEncoding.EncodeToString(good.Raw)})
	f("good one replayed", nip86AuthOpts{header: "Nostr " + base64.StdEncoding.EncodeToString(good.Raw)}, "already used")
}

// TestNIP86TokenLimit: the handler remembers at most its maximum of
// tokens within their window; at the limit a token is accepted, past it
// the request is answered 429 and nothing runs, and once the window has
// passed tokens are accepted again.
func TestNIP86TokenLimit(t *testing.T) {
	e := newNIP86Env(t)
	e.handler.used = nip98.NewReplays(3)
	body := []byte(`{"method":"listbannedpubkeys","params":[]}`)
	for i := 0; i < 3; i++ {
		if status, out := e.post(t, body, nip86AuthOpts{}); status != http.StatusOK || out["error"] != nil {
			t.Fatalf("token %d (at the limit): status %d %v", i+1, status, out)
		}
	}
	if status, out := e.post(t, body, nip86AuthOpts{}); status != http.StatusTooManyRequests || !strings.HasPrefix(out["error"].(string), "rate-limited:") {
		t.Fatalf("token past the limit: status %d %v; want 429 rate-limited", status, out)
	}
	e.now = e.now.Add(61 * time.Second)
	if status, out := e.post(t, body, nip86AuthOpts{}); status != http.StatusOK || out["error"] != nil {
		t.Fatalf("after the window: status %d %v", status, out)
	}
}

func TestNIP86HTTPErrors(t *testing.T) {
	e := newNIP86Env(t)
	req := func(method, ctype string, body []byte) (int, map[string]any) {
		t.Helper()
		r, _ := http.NewRequest(method, e.srv.URL, bytes.NewReader(body))
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		r.Header.Set("Authorization", "Nostr "+base64.StdEncoding.EncodeToString(e.authEvent(body, nip86AuthOpts{method: method}).Raw))
		return nip86Do(t, r)
	}
	if status, _ := req(http.MethodGet, NIP86ContentType, nil); status != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", status)
	}
	if status, _ := req(http.MethodOptions, "", nil); status != http.StatusNoContent {
		t.Fatalf("OPTIONS: %d", status)
	}
	if status, _ := req(http.MethodPost, "application/json", []byte(`{}`)); status != http.StatusUnsupportedMediaType {
		t.Fatalf("wrong type: %d", status)
	}
	if status, _ := req(http.MethodPost, NIP86ContentType+"; charset=utf-8", []byte(`{"method":"listallowedkinds"}`)); status != http.StatusOK {
		t.Fatalf("type with parameters: %d", status)
	}
	big := append([]byte(`{"method":"banpubkey","params":["`), bytes.Repeat([]byte("a"), nip86MaxBody)...)
	if status, _ := req(http.MethodPost, NIP86ContentType, big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("large body: %d", status)
	}
	for _, body := range []string{`not json`, `{"params":[]}`, `{"method":5}`, `[]`} {
		if status, out := req(http.MethodPost, NIP86ContentType, []byte(body)); status != http.StatusBadRequest || out["error"] == nil {
			t.Fatalf("%s: %d %v", body, status, out)
		}
	}
}

func TestNIP86LoopbackWithoutURL(t *testing.T) {
	lists, _ := policy.NewLists(context.Background(), policy.Config{}, nil)
	admin := nostr.SecretKeyFromSeed([]byte("admin"))
	h := NewNIP86Handler(NIP86Deps{Lists: lists, Admins: []nostr.PubKey{admin.PubKey()}})
	post := func(host, u string) int {
		body := []byte(`{"method":"listblockedips","params":[]}`)
		sum := sha256.Sum256(body)
		ev := &nostr.Event{Kind: nostr.KindHTTPAuth, CreatedAt: time.Now().Unix(),
			Tags: nostr.Tags{{"u", u}, {"method", "POST"}, {"payload", hex.EncodeToString(sum[:])}}}
		nostr.SignEvent(ev, admin)
		r := httptest.NewRequest(http.MethodPost, "http://"+host+"/", bytes.NewReader(body))
		r.Header.Set("Content-Type", NIP86ContentType)
		r.Header.Set("Authorization", "Nostr "+base64.StdEncoding.EncodeToString(ev.Raw))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if c := post("127.0.0.1:7447", "ws://127.0.0.1:7447"); c != http.StatusOK {
		t.Fatalf("loopback: %d", c)
	}
	if c := post("localhost:7447", "ws://localhost:7447/"); c != http.StatusOK {
		t.Fatalf("localhost: %d", c)
	}
	if c := post("relay.example.com", "wss://relay.example.com"); c != http.StatusUnauthorized {
		t.Fatalf("public host without a configured URL: %d", c)
	}
}

func FuzzNIP86Request(f *testing.F) {
	f.Add([]byte(`{"method":"banpubkey","params":["x"]}`), "Nostr e30=")
	f.Add([]byte(`{}`), "")
	lists, _ := policy.NewLists(context.Background(), policy.Config{}, nil)
	h := NewNIP86Handler(NIP86Deps{Lists: lists, URL: "wss://relay.example.com", Admins: []nostr.PubKey{{1}}})
	f.Fuzz(func(t *testing.T, body []byte, auth string) {
		r := httptest.NewRequest(http.MethodPost, "https://relay.example.com/", bytes.NewReader(body))
		r.Header.Set("Content-Type", NIP86ContentType)
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized && w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d without a valid admin signature", w.Code)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("response is not JSON: %q", w.Body.Bytes())
		}
	})
}
