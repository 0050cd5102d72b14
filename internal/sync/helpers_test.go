package sync

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	gosync "sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// eventCache keeps signed events between tests: signing is the slow part.
var eventCache gosync.Map // string -> []*nostr.Event

// signed returns n signed kind-kind events by a key derived from seed,
// created at base + i*step (step 0: all at base).
func signed(seed string, n, kind int, base, step int64) []*nostr.Event {
	key := fmt.Sprintf("%s/%d/%d/%d/%d", seed, n, kind, base, step)
	if v, ok := eventCache.Load(key); ok {
		return v.([]*nostr.Event)
	}
	k := relaytest.NewKey(seed)
	out := make([]*nostr.Event, n)
	for i := range out {
		out[i] = k.Event(kind, fmt.Sprintf("%s %d", seed, i), nil, base+int64(i)*step)
	}
	eventCache.Store(key, out)
	return out
}

// modelWith returns a model store holding events.
func modelWith(t testing.TB, events ...[]*nostr.Event) *storetest.Model {
	t.Helper()
	m := storetest.NewModel()
	fill(t, m, events...)
	return m
}

// fill saves events to st and fails unless all are stored.
func fill(t testing.TB, st store.Store, events ...[]*nostr.Event) {
	t.Helper()
	all := slices.Concat(events...)
	if len(all) == 0 {
		return
	}
	res, err := st.Save(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Stored {
			t.Fatalf("fill %d: %s %v", i, r.Outcome, r.Err)
		}
	}
}

// items returns every item of st.
func items(t testing.TB, st store.Store, f nostr.Filter) []store.Item {
	t.Helper()
	it, err := st.Items(context.Background(), []nostr.Filter{f}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// want returns the items of events, in store order.
func want(events ...[]*nostr.Event) []store.Item {
	var out []store.Item
	for _, ev := range slices.Concat(events...) {
		out = append(out, store.Item{CreatedAt: ev.CreatedAt, ID: ev.ID})
	}
	slices.SortFunc(out, store.CompareItems)
	return slices.Compact(out)
}

// sameItems fails unless st holds exactly the items wanted.
func sameItems(t testing.TB, what string, st store.Store, f nostr.Filter, wanted []store.Item) {
	t.Helper()
	got := items(t, st, f)
	if !slices.Equal(got, wanted) {
		t.Fatalf("%s: %d items, want %d", what, len(got), len(wanted))
	}
}

// fakeRelay is a minimal relay without NIP-77, for the fallback and for
// upload tests: it serves REQ from a slice (newest first, ties by id),
// answers EVENT through onEvent, NIP-11 with info, and NEG-OPEN as neg
// says ("notice", "closed", "negerr" or "silent").
type fakeRelay struct {
	t       testing.TB
	srv     *httptest.Server
	URL     string
	neg     string
	info    string
	onEvent func(ev *nostr.Event) (bool, string)

	mu     gosync.Mutex
	events []*nostr.Event
	reqs   int
}

func newFakeRelay(t testing.TB, neg, info string, events []*nostr.Event) *fakeRelay {
	f := &fakeRelay{t: t, neg: neg, info: info, events: slices.Clone(events)}
	f.onEvent = func(ev *nostr.Event) (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, x := range f.events {
			if x.ID == ev.ID {
				return true, "duplicate: have it"
			}
		}
		f.events = append(f.events, ev)
		return true, ""
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			if f.info == "" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/nostr+json")
			fmt.Fprint(w, f.info)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		go f.serve(ws)
	}))
	t.Cleanup(f.srv.Close)
	f.URL = "ws" + strings.TrimPrefix(f.srv.URL, "http")
	return f
}

func (f *fakeRelay) serve(ws *websocket.Conn) {
	defer ws.Close()
	send := func(v ...any) {
		b, _ := json.Marshal(v)
		_ = ws.WriteMessage(websocket.TextMessage, b)
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		m, err := nostr.ParseClientMessage(data, nil)
		if err != nil {
			send("NOTICE", "error: "+err.Error())
			continue
		}
		switch m.Type {
		case nostr.MsgReq:
			f.mu.Lock()
			f.reqs++
			evs := slices.Clone(f.events)
			f.mu.Unlock()
			slices.SortFunc(evs, func(a, b *nostr.Event) int {
				if c := cmp.Compare(b.CreatedAt, a.CreatedAt); c != 0 {
					return c
				}
				return slices.Compare(a.ID[:], b.ID[:])
			})
			sent := map[nostr.ID]bool{}
			for _, flt := range m.Filters {
				n := 0
				for _, ev := range evs {
					if flt.HasLimit && n >= flt.Limit {
						break
					}
					if flt.Matches(ev) && !sent[ev.ID] {
						sent[ev.ID] = true
						n++
						_ = ws.WriteMessage(websocket.TextMessage, []byte(`["EVENT","`+m.SubID+`",`+string(ev.Raw)+`]`))
					}
				}
			}
			send("EOSE", m.SubID)
		case nostr.MsgEvent:
			ok, msg := f.onEvent(m.Event)
			send("OK", m.Event.ID.Hex(), ok, msg)
		case nostr.MsgNegOpen:
			switch f.neg {
			case "notice":
				send("NOTICE", "ERROR: bad msg: unknown cmd")
			case "closed":
				send("CLOSED", m.SubID, "error: unknown message")
			case "negerr":
				send("NEG-ERR", m.SubID, "blocked: this query is too big")
			}
		}
	}
}
