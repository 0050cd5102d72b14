package interop

// End-to-end interop over real WebSockets, one test per direction:
//
//   - go-nostr's NIP-77 client (nip77.NegentropySync) syncs against
//     petrel's relay (internal/relaytest);
//   - petrel's sync client (internal/sync) syncs against a minimal relay
//     whose negentropy side is go-nostr's (nip77/negentropy as server).

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	nostr "github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77"
	gn "github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"

	"github.com/petrel-relay/petrel/internal/negentropy"
	pnostr "github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

// petrelEvents makes n events signed by petrel's code.
func petrelEvents(seed string, n int, base int64) []*pnostr.Event {
	k := relaytest.NewKey(seed)
	out := make([]*pnostr.Event, n)
	for i := range out {
		out[i] = k.Event(1, fmt.Sprintf("%s %d", seed, i), nil, base+int64(i%50))
	}
	return out
}

// goNostrEvents makes n events signed by go-nostr's code, as petrel events.
func goNostrEvents(t testing.TB, n int, base int64) []*pnostr.Event {
	t.Helper()
	sk := nostr.GeneratePrivateKey()
	out := make([]*pnostr.Event, n)
	for i := range out {
		ev := nostr.Event{Kind: 1, Content: fmt.Sprintf("go-nostr %d", i), CreatedAt: nostr.Timestamp(base + int64(i%40)), Tags: nostr.Tags{}}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		p, err := pnostr.ParseEvent([]byte(ev.String()), nil)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = p
	}
	return out
}

// toGoNostr converts a petrel event.
func toGoNostr(t testing.TB, ev *pnostr.Event) *nostr.Event {
	t.Helper()
	var g nostr.Event
	if err := json.Unmarshal(ev.Raw, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// idsOf returns the hex ids of events, sorted.
func idsOf(events []*pnostr.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.ID.Hex()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// storeIDs returns the hex ids in a petrel store, sorted.
func storeIDs(t testing.TB, st store.Store) []string {
	t.Helper()
	items, err := st.Items(context.Background(), []pnostr.Filter{{}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID.Hex()
	}
	slices.Sort(out)
	return out
}

func save(t testing.TB, st store.Store, events ...[]*pnostr.Event) {
	t.Helper()
	res, err := st.Save(context.Background(), slices.Concat(events...))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Stored {
			t.Fatalf("save %d: %s", i, r.Outcome)
		}
	}
}

// memStore is go-nostr's view of a local event store.
type memStore struct {
	mu     sync.Mutex
	events map[string]*nostr.Event
}

func (m *memStore) Publish(_ context.Context, ev nostr.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(ev.ID) != 64 {
		return fmt.Errorf("bad id %q", ev.ID)
	}
	m.events[ev.ID] = &ev
	return nil
}

func (m *memStore) QuerySync(_ context.Context, f nostr.Filter) ([]*nostr.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*nostr.Event
	for _, ev := range m.events {
		if f.Matches(ev) {
			out = append(out, ev)
		}
	}
	return out, nil
}

func (m *memStore) QueryEvents(ctx context.Context, f nostr.Filter) (chan *nostr.Event, error) {
	evs, _ := m.QuerySync(ctx, f)
	ch := make(chan *nostr.Event, len(evs))
	for _, ev := range evs {
		ch <- ev
	}
	close(ch)
	return ch, nil
}

func (m *memStore) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.events))
	for id := range m.events {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestGoNostrClientAgainstPetrelRelay: go-nostr's NegentropySync, holding
// its own events and some in common, syncs both ways with petrel's relay
// (whose replies are cut at a small frame size limit, so it takes many
// rounds): afterwards both hold the union.
func TestGoNostrClientAgainstPetrelRelay(t *testing.T) {
	if raceEnabled {
		t.Skip("go-nostr v0.38.2's NegentropySync races with itself (nip77/idlistpool.go, Relay.Close); " +
			"TestGoNostrSessionAgainstPetrelRelay covers its negentropy client under -race")
	}
	const base = 1_700_000_000
	common := petrelEvents("interop-common", 1500, base)
	relayOnly := petrelEvents("interop-relay", 80, base)
	clientOnly := goNostrEvents(t, 70, base)
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{NegFrameLimit: 4096}})
	save(t, r.Store, common, relayOnly)
	ms := &memStore{events: map[string]*nostr.Event{}}
	for _, ev := range slices.Concat(common, clientOnly) {
		g := toGoNostr(t, ev)
		ms.events[g.ID] = g
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := nip77.NegentropySync(ctx, ms, r.URL, nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	all := idsOf(slices.Concat(common, relayOnly, clientOnly))
	if got := ms.ids(); !slices.Equal(got, all) {
		t.Fatalf("go-nostr side: %d events, want %d", len(got), len(all))
	}
	// go-nostr's uploads are waited for, but give the relay's commit a
	// moment to be visible to Items.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(storeIDs(t, r.Store), all) {
		if time.Now().After(deadline) {
			t.Fatalf("petrel relay: %d events, want %d", len(storeIDs(t, r.Store)), len(all))
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := r.Relay.NegStats()
	t.Logf("petrel relay: %+v", st)
	if st.Opened != 1 || st.Messages < 3 {
		t.Fatalf("expected one multi-round session: %+v", st)
	}
}

// goNostrRelay is a minimal relay whose NIP-77 side is go-nostr's
// negentropy (as server); REQ by ids and EVENT are served from memory.
type goNostrRelay struct {
	t     testing.TB
	URL   string
	limit int // go-nostr's frame size limit

	mu     sync.Mutex
	events []*pnostr.Event
	rounds int
}

func startGoNostrRelay(t testing.TB, limit int, events []*pnostr.Event) *goNostrRelay {
	g := &goNostrRelay{t: t, limit: limit, events: slices.Clone(events)}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			w.Header().Set("Content-Type", "application/nostr+json")
			fmt.Fprint(w, `{"supported_nips":[1,77],"limitation":{"max_limit":200,"max_message_length":131072}}`)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		go g.serve(ws)
	}))
	t.Cleanup(srv.Close)
	g.URL = "ws" + strings.TrimPrefix(srv.URL, "http")
	return g
}

func (g *goNostrRelay) stored() []*pnostr.Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.events)
}

func (g *goNostrRelay) serve(ws *websocket.Conn) {
	defer ws.Close()
	send := func(v ...any) {
		b, _ := json.Marshal(v)
		_ = ws.WriteMessage(websocket.TextMessage, b)
	}
	sessions := map[string]*gn.Negentropy{}
	reconcile := func(sub string, n *gn.Negentropy, msg []byte) {
		out, err := n.Reconcile(hex.EncodeToString(msg))
		if err != nil {
			delete(sessions, sub)
			send("NEG-ERR", sub, "invalid: "+err.Error())
			return
		}
		g.mu.Lock()
		g.rounds++
		g.mu.Unlock()
		send("NEG-MSG", sub, out)
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		m, err := pnostr.ParseClientMessage(data, nil)
		if err != nil {
			send("NOTICE", "invalid: "+err.Error())
			continue
		}
		switch m.Type {
		case pnostr.MsgNegOpen:
			v := vector.New()
			for _, ev := range g.stored() {
				if m.Filters[0].Matches(ev) {
					v.Insert(nostr.Timestamp(ev.CreatedAt), ev.ID.Hex())
				}
			}
			v.Seal()
			n := gn.New(v, g.limit)
			sessions[m.SubID] = n
			reconcile(m.SubID, n, m.NegPayload)
		case pnostr.MsgNegMsg:
			n := sessions[m.SubID]
			if n == nil {
				send("NEG-ERR", m.SubID, "closed: no such session")
				continue
			}
			reconcile(m.SubID, n, m.NegPayload)
		case pnostr.MsgNegClose:
			delete(sessions, m.SubID)
		case pnostr.MsgReq:
			evs := g.stored()
			slices.SortFunc(evs, func(a, b *pnostr.Event) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
			for _, ev := range evs {
				if pnostr.MatchesAny(m.Filters, ev) {
					_ = ws.WriteMessage(websocket.TextMessage, []byte(`["EVENT","`+m.SubID+`",`+string(ev.Raw)+`]`))
				}
			}
			send("EOSE", m.SubID)
		case pnostr.MsgEvent:
			// Checked by go-nostr, not by petrel.
			if ok, err := toGoNostr(g.t, m.Event).CheckSignature(); !ok || err != nil {
				send("OK", m.Event.ID.Hex(), false, "invalid: bad signature")
				continue
			}
			g.mu.Lock()
			g.events = append(g.events, m.Event)
			g.mu.Unlock()
			send("OK", m.Event.ID.Hex(), true, "")
		}
	}
}

// TestPetrelSyncAgainstGoNostrServer: petrel's sync client reconciles its
// local store with a relay whose negentropy server is go-nostr's, both
// ways, with and without a frame size limit on the server.
func TestPetrelSyncAgainstGoNostrServer(t *testing.T) {
	const base = 1_700_000_000
	common := petrelEvents("interop2-common", 2000, base)
	localOnly := petrelEvents("interop2-local", 90, base)
	remoteOnly := goNostrEvents(t, 110, base)
	for _, limit := range []int{0, 4096} {
		g := startGoNostrRelay(t, limit, slices.Concat(common, remoteOnly))
		st := storetest.NewModel()
		save(t, st, common, localOnly)
		res, err := psync.Run(context.Background(), psync.Options{Remote: g.URL, Store: st, Direction: psync.Both})
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		t.Logf("limit %d: %s", limit, res.String())
		all := idsOf(slices.Concat(common, localOnly, remoteOnly))
		if got := storeIDs(t, st); !slices.Equal(got, all) {
			t.Fatalf("limit %d: petrel side %d events, want %d", limit, len(got), len(all))
		}
		if got := idsOf(g.stored()); !slices.Equal(got, all) {
			t.Fatalf("limit %d: go-nostr side %d events, want %d", limit, len(got), len(all))
		}
		if res.Have != len(localOnly) || res.Need != len(remoteOnly) || res.Up.Moved != len(localOnly) || res.Down.Moved != len(remoteOnly) {
			t.Fatalf("limit %d: %s", limit, res.String())
		}
		if limit != 0 && res.Rounds < 3 {
			t.Fatalf("limit %d: only %d rounds", limit, res.Rounds)
		}
	}
}

// TestGoNostrSessionAgainstPetrelRelay drives go-nostr's negentropy client
// (the object NegentropySync uses) over a WebSocket to petrel's relay, with
// frame size limits on both sides, and checks it learns exactly the
// difference.
func TestGoNostrSessionAgainstPetrelRelay(t *testing.T) {
	const base = 1_700_000_000
	common := petrelEvents("interop3-common", 3000, base)
	relayOnly := petrelEvents("interop3-relay", 120, base)
	clientOnly := petrelEvents("interop3-client", 100, base)
	for _, limit := range []int{0, 4096} {
		relayLimit, clientLimit := limit, limit
		if limit == 0 {
			// No limit on the relay; the client must still fit the
			// relay's max_message_bytes.
			relayLimit, clientLimit = -1, 60000
		}
		r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{NegFrameLimit: relayLimit}})
		save(t, r.Store, common, relayOnly)
		var items []negentropy.Item
		for _, ev := range slices.Concat(common, clientOnly) {
			items = append(items, negentropy.Item{Timestamp: uint64(ev.CreatedAt), ID: ev.ID})
		}
		client := theirClient{theirs(items, clientLimit)}
		ws, _, err := websocket.DefaultDialer.Dial(r.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := client.Initiate()
		if err != nil {
			t.Fatal(err)
		}
		send := func(v ...any) {
			b, _ := json.Marshal(v)
			if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
				t.Fatal(err)
			}
		}
		send("NEG-OPEN", "gn", json.RawMessage(`{"kinds":[1]}`), hex.EncodeToString(msg))
		var s session
		for rounds := 1; ; rounds++ {
			_, data, err := ws.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			m, err := pnostr.ParseRelayMessage(data)
			if err != nil || m.Type != "NEG-MSG" || m.SubID != "gn" {
				t.Fatalf("round %d: %v %s", rounds, err, data)
			}
			next, have, need, err := client.ReconcileClient(m.NegPayload)
			if err != nil {
				t.Fatal(err)
			}
			s.have, s.need = append(s.have, have...), append(s.need, need...)
			if next == nil {
				t.Logf("limit %d: %d rounds", limit, rounds)
				break
			}
			send("NEG-MSG", "gn", hex.EncodeToString(next))
		}
		send("NEG-CLOSE", "gn")
		ws.Close()
		if n := missing(t, negItemsOf(clientOnly, common), negItemsOf(relayOnly, common), s); n != 0 {
			t.Fatalf("limit %d: %d ids missed", limit, n)
		}
	}
}

// negItemsOf returns the events' items.
func negItemsOf(sets ...[]*pnostr.Event) []negentropy.Item {
	var out []negentropy.Item
	for _, ev := range slices.Concat(sets...) {
		out = append(out, negentropy.Item{Timestamp: uint64(ev.CreatedAt), ID: ev.ID})
	}
	return out
}
