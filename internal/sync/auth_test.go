package sync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	gosync "sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// authRelay starts a relay that requires NIP-42 authentication for
// every request and event.
func authRelay(t *testing.T) *relaytest.Relay {
	return relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthRequired: true}})
}

// wantAuthError fails unless err is the relay's "auth-required:" answer
// to request, and not taken for a relay without NIP-77.
func wantAuthError(t *testing.T, err error, request string) {
	t.Helper()
	var are *client.AuthRequiredError
	if !errors.As(err, &are) || !errors.Is(err, client.ErrAuthRequired) || are.Request != request ||
		!strings.HasPrefix(are.Message, "auth-required:") || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrRefused) {
		t.Fatalf("error %v, want the relay's auth-required answer to %s", err, request)
	}
}

// TestSyncAuthDown: a relay that requires authentication refuses the
// NEG-OPEN; without a key Run says so (not "no NIP-77", so no fallback
// paging either) and nothing is saved; with one it authenticates, opens
// the session again and downloads everything.
func TestSyncAuthDown(t *testing.T) {
	t.Parallel()
	k := relaytest.NewKey("sync-auth-down")
	evs := signed("sync-auth-down", 40, 1, base, 3)
	r := authRelay(t)
	fill(t, r.Store, evs)
	st := storetest.NewModel()

	_, err := Run(context.Background(), Options{Remote: r.URL, Store: st, FallbackPaging: true})
	wantAuthError(t, err, "NEG-OPEN")
	sameItems(t, "without a key", st, nostr.Filter{}, nil)

	res, err := Run(context.Background(), Options{Remote: r.URL, Store: st, AuthKey: &k.SK})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeNegentropy || res.Need != len(evs) || res.Down.Moved != len(evs) {
		t.Fatalf("with a key: %s", res.String())
	}
	sameItems(t, "with a key", st, nostr.Filter{}, want(evs))
	if n := r.Stats().AuthAccepted; n != 1 {
		t.Fatalf("%d AUTHs accepted, want 1", n)
	}
}

// TestSyncAuthUp: uploading to a relay that requires authentication
// fails without a key, leaving the relay empty, and moves everything
// with one.
func TestSyncAuthUp(t *testing.T) {
	t.Parallel()
	k := relaytest.NewKey("sync-auth-up")
	evs := signed("sync-auth-up", 40, 1, base, 3)
	r := authRelay(t)
	st := modelWith(t, evs)

	_, err := Run(context.Background(), Options{Remote: r.URL, Store: st, Direction: Up})
	wantAuthError(t, err, "NEG-OPEN")
	sameItems(t, "remote without a key", r.Store, nostr.Filter{}, nil)

	res, err := Run(context.Background(), Options{Remote: r.URL, Store: st, Direction: Up, AuthKey: &k.SK})
	if err != nil {
		t.Fatal(err)
	}
	if res.Have != len(evs) || res.Up.Moved != len(evs) || res.Up.RefusedTotal() != 0 {
		t.Fatalf("with a key: %s", res.String())
	}
	sameItems(t, "remote with a key", r.Store, nostr.Filter{}, want(evs))
}

// TestSyncAuthBridge: with From, both relays require authentication;
// one key answers both.
func TestSyncAuthBridge(t *testing.T) {
	t.Parallel()
	k := relaytest.NewKey("sync-auth-bridge")
	evs := signed("sync-auth-bridge", 40, 1, base, 3)
	a, b := authRelay(t), authRelay(t)
	fill(t, a.Store, evs)

	_, err := Run(context.Background(), Options{Remote: a.URL, From: b.URL, Direction: Down})
	wantAuthError(t, err, "NEG-OPEN")
	sameItems(t, "B without a key", b.Store, nostr.Filter{}, nil)

	res, err := Run(context.Background(), Options{Remote: a.URL, From: b.URL, Direction: Down, AuthKey: &k.SK})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModeBridge || res.Down.Moved != len(evs) {
		t.Fatalf("with a key: %s", res.String())
	}
	sameItems(t, "B with a key", b.Store, nostr.Filter{}, want(evs))
	for _, r := range []*relaytest.Relay{a, b} {
		if n := r.Stats().AuthAccepted; n != 1 {
			t.Fatalf("%s: %d AUTHs accepted, want 1", r.URL, n)
		}
	}
}

// TestSyncAuthPaging: a relay without NIP-77 (a proxy answering
// NEG-OPEN with NOTICE in front of a relay requiring authentication) is
// paged through with REQ, which it refuses until the sync
// authenticates.
func TestSyncAuthPaging(t *testing.T) {
	t.Parallel()
	k := relaytest.NewKey("sync-auth-paging")
	evs := signed("sync-auth-paging", 40, 1, base, 3)
	r := authRelay(t)
	fill(t, r.Store, evs)
	url := noNegProxy(t, r.URL)
	st := storetest.NewModel()

	_, err := Run(context.Background(), Options{Remote: url, Store: st, FallbackPaging: true})
	wantAuthError(t, err, "REQ")
	sameItems(t, "without a key", st, nostr.Filter{}, nil)

	res, err := Run(context.Background(), Options{Remote: url, Store: st, FallbackPaging: true, AuthKey: &k.SK})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModePaging || res.Down.Moved != len(evs) {
		t.Fatalf("with a key: %s", res.String())
	}
	sameItems(t, "with a key", st, nostr.Filter{}, want(evs))
}

// TestSyncAuthProtected: a relay that lets anyone in refuses NIP-70
// protected events with "auth-required:" until their author
// authenticates. Without a key they are counted as refused (the sync
// goes on); another key is refused "restricted:" once authenticated;
// the author's key moves them, also those sent before its AUTH was
// answered.
func TestSyncAuthProtected(t *testing.T) {
	t.Parallel()
	author, other := relaytest.NewKey("sync-auth-author"), relaytest.NewKey("sync-auth-other")
	var protected []*nostr.Event
	for i := range 20 {
		protected = append(protected, author.Event(1, fmt.Sprintf("protected %d", i), nostr.Tags{{"-"}}, base+int64(i)))
	}
	plain := signed("sync-auth-plain", 5, 1, base, 1)
	r := relaytest.Start(t, relaytest.Options{})
	st := modelWith(t, protected, plain)
	up := func(key *nostr.SecretKey) Result {
		t.Helper()
		res, err := Run(context.Background(), Options{Remote: r.URL, Store: st, Direction: Up, AuthKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := up(nil)
	if res.Up.Moved != len(plain) || res.Up.Refused["auth-required"] != len(protected) || res.Up.RefusedTotal() != len(protected) {
		t.Fatalf("without a key: %s", res.String())
	}
	sameItems(t, "without a key", r.Store, nostr.Filter{}, want(plain))
	res = up(&other.SK)
	if res.Up.Moved != 0 || res.Up.Refused["restricted"] != len(protected) || res.Up.RefusedTotal() != len(protected) {
		t.Fatalf("another key: %s", res.String())
	}
	res = up(&author.SK)
	if res.Up.Moved != len(protected) || res.Up.RefusedTotal() != 0 {
		t.Fatalf("the author's key: %s", res.String())
	}
	sameItems(t, "the author's key", r.Store, nostr.Filter{}, want(protected, plain))
}

// TestSyncAuthRefused: a relay that refuses our AUTH (here: its relay.url
// names another host, so our AUTH's relay tag does not name it) ends Run
// with ErrAuthRefused, naming that relay once, in both modes.
func TestSyncAuthRefused(t *testing.T) {
	t.Parallel()
	k := relaytest.NewKey("sync-auth-refused")
	a := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthRequired: true, URL: "wss://elsewhere.example"}})
	b := relaytest.Start(t, relaytest.Options{})
	check := func(what string, o Options) {
		t.Helper()
		o.AuthKey = &k.SK
		_, err := Run(context.Background(), o)
		if !errors.Is(err, client.ErrAuthRefused) || !strings.HasPrefix(err.Error(), a.URL+": ") || strings.Count(err.Error(), a.URL) != 1 {
			t.Fatalf("%s: %v", what, err)
		}
	}
	check("store", Options{Remote: a.URL, Store: storetest.NewModel()})
	check("bridge", Options{Remote: b.URL, From: a.URL})
}

// noNegProxy returns the URL of a WebSocket proxy to the relay at target
// that answers NEG-OPEN itself as a relay without NIP-77 does (NOTICE)
// and passes every other message through unchanged.
func noNegProxy(t *testing.T, target string) string {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.NotFound(w, r) // no NIP-11 document
			return
		}
		down, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer down.Close()
		upstream, _, err := websocket.DefaultDialer.Dial(target, nil)
		if err != nil {
			return
		}
		defer upstream.Close()
		var wmu gosync.Mutex // down has two writers
		write := func(data []byte) error {
			wmu.Lock()
			defer wmu.Unlock()
			return down.WriteMessage(websocket.TextMessage, data)
		}
		go func() {
			defer down.Close()
			for {
				_, data, err := upstream.ReadMessage()
				if err != nil || write(data) != nil {
					return
				}
			}
		}()
		for {
			_, data, err := down.ReadMessage()
			if err != nil {
				return
			}
			if bytes.HasPrefix(data, []byte(`["NEG-OPEN"`)) {
				err = write([]byte(`["NOTICE","ERROR: bad msg: unknown cmd"]`))
			} else {
				err = upstream.WriteMessage(websocket.TextMessage, data)
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}
