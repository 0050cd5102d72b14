package relay_test

// Every client-facing limit at N (accepted) and N+1 (refused with the
// right answer, the connection still working when it should, and the trip
// counted in Stats().LimitTrips).

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// sizedEvent returns an event by k whose JSON is exactly size bytes.
func sizedEvent(t testing.TB, k relaytest.Key, tags nostr.Tags, size int) *nostr.Event {
	t.Helper()
	ts := time.Now().Unix()
	base := k.Event(1, "", tags, ts)
	pad := size - len(base.Raw)
	if pad < 0 {
		t.Fatalf("sizedEvent: base event is %d bytes, want %d", len(base.Raw), size)
	}
	ev := k.Event(1, strings.Repeat("a", pad), tags, ts)
	if len(ev.Raw) != size {
		t.Fatalf("sizedEvent: got %d bytes, want %d", len(ev.Raw), size)
	}
	return ev
}

// paddedReq returns a REQ message of exactly size bytes (JSON whitespace
// pads it).
func paddedReq(t testing.TB, subID string, size int) string {
	t.Helper()
	head := `["REQ","` + subID + `",{"kinds":[1]}`
	if size < len(head)+1 {
		t.Fatalf("paddedReq: %d bytes is too small", size)
	}
	return head + strings.Repeat(" ", size-len(head)-1) + "]"
}

// writeFrame writes one complete, masked WebSocket frame straight to the
// client's socket (bypassing gorilla, which fragments large messages). No
// other write may be in progress on c.
func writeFrame(t testing.TB, c *relaytest.Client, opcode byte, payload []byte) {
	t.Helper()
	if err := writeFrameErr(c, opcode, payload); err != nil {
		t.Fatalf("write frame: %v", err)
	}
}

// writeFrameErr is writeFrame returning the error.
func writeFrameErr(c *relaytest.Client, opcode byte, payload []byte) error {
	hdr := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	body := make([]byte, len(payload))
	for i, b := range payload {
		body[i] = b ^ mask[i%4]
	}
	c.Conn.UnderlyingConn().SetWriteDeadline(time.Now().Add(relaytest.DefaultTimeout))
	_, err := c.Conn.UnderlyingConn().Write(append(hdr, body...))
	return err
}

// expectWorks checks that c still gets answers.
func expectWorks(t testing.TB, c *relaytest.Client) {
	t.Helper()
	for _, m := range barrier(t, c) {
		t.Fatalf("unexpected message: %s", describe(m))
	}
}

func TestLimitMessageBytes(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{}) // default 131072
	const n = 131072
	if got := r.Relay.Config().MaxMessageBytes; got != n {
		t.Fatalf("default max_message_bytes = %d, want %d", got, n)
	}
	// N: accepted, as one (fragmented) message and as one frame.
	c := relaytest.Dial(t, r.URL)
	c.SendRaw(paddedReq(t, "n2", n))
	c.UntilEOSE("n2")
	writeFrame(t, c, 0x1, []byte(paddedReq(t, "n3", n)))
	c.UntilEOSE("n3")
	expectWorks(t, c)
	if v := trips(r, "max_message_bytes"); v != 0 {
		t.Fatalf("max_message_bytes tripped %d times at N", v)
	}

	// N+1: closed with 1009, whether fragmented (gorilla) or one frame.
	// The relay may close while the message is still being written, so
	// write errors are expected.
	for i, send := range []func(c *relaytest.Client){
		func(c *relaytest.Client) { _ = c.WriteMessage(websocket.TextMessage, []byte(paddedReq(t, "big", n+1))) },
		func(c *relaytest.Client) { _ = writeFrameErr(c, 0x1, []byte(paddedReq(t, "big", n+1))) },
	} {
		c := relaytest.Dial(t, r.URL)
		send(c)
		if code := c.WaitClosed(relaytest.DefaultTimeout); code != relay.CloseTooBig {
			t.Fatalf("case %d: close code %d, want %d", i, code, relay.CloseTooBig)
		}
		want := int64(i + 1)
		waitFor(t, "max_message_bytes counted", func() bool { return trips(r, "max_message_bytes") >= want })
		if v := trips(r, "max_message_bytes"); v != want {
			t.Fatalf("case %d: max_message_bytes = %d, want %d", i, v, want)
		}
	}
	// Other connections are unaffected.
	expectWorks(t, c)
}

func TestLimitEventBytes(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{}) // default 65536
	alice := relaytest.NewKey("limit-eventbytes")
	c := relaytest.Dial(t, r.URL)
	const n = 65536
	c.MustPublish(sizedEvent(t, alice, nil, n))
	before := storedCount(t, r)
	m := c.Publish(sizedEvent(t, alice, nil, n+1))
	if m.OK || !strings.HasPrefix(m.Message, "invalid: ") {
		t.Fatalf("N+1: OK %v %q, want false \"invalid: ...\"", m.OK, m.Message)
	}
	if v := trips(r, "max_event_bytes"); v != 1 {
		t.Fatalf("max_event_bytes = %d, want 1", v)
	}
	if storedCount(t, r) != before {
		t.Fatal("store changed")
	}
	expectWorks(t, c)
	// A configured smaller bound applies the same way.
	r2 := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxEventBytes: 1000}})
	c2 := relaytest.Dial(t, r2.URL)
	c2.MustPublish(sizedEvent(t, alice, nil, 1000))
	if m := c2.Publish(sizedEvent(t, alice, nil, 1001)); m.OK || !strings.HasPrefix(m.Message, "invalid: ") {
		t.Fatalf("configured N+1: OK %v %q", m.OK, m.Message)
	}
	if v := trips(r2, "max_event_bytes"); v != 1 {
		t.Fatalf("configured: max_event_bytes = %d, want 1", v)
	}
}

func TestLimitSubscriptions(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{}) // default 200
	const n = 200
	c := relaytest.Dial(t, r.URL)
	for i := 0; i < n; i++ {
		c.SendRaw(fmt.Sprintf(`["REQ","s%d",{"kinds":[1]}]`, i))
	}
	eose := map[string]bool{} // stored queries run in parallel: any order
	for i := 0; i < n; i++ {
		eose[c.ExpectType("EOSE").SubID] = true
	}
	for i := 0; i < n; i++ {
		if !eose[fmt.Sprintf("s%d", i)] {
			t.Fatalf("no EOSE for s%d", i)
		}
	}
	if v := r.Stats().SubscriptionsActive; v != n {
		t.Fatalf("subscriptions_active = %d, want %d", v, n)
	}
	c.SendRaw(`["REQ","one-more",{"kinds":[1]}]`)
	c.ExpectClosed("one-more", "blocked: ")
	if v := trips(r, "max_subscriptions"); v != 1 {
		t.Fatalf("max_subscriptions = %d, want 1", v)
	}
	// Replacing an open subscription at the cap is allowed.
	c.Req("s7", `{"kinds":[7]}`)
	// Closing one frees a place.
	c.SendRaw(`["CLOSE","s0"]`)
	c.Req("one-more", `{"kinds":[1]}`)
	if v := r.Stats().SubscriptionsActive; v != n {
		t.Fatalf("subscriptions_active = %d, want %d", v, n)
	}
	// The cap is per connection.
	relaytest.Dial(t, r.URL).Req("other", `{"kinds":[1]}`)
	if v := trips(r, "max_subscriptions"); v != 1 {
		t.Fatalf("max_subscriptions = %d, want 1", v)
	}
}

// TestLimitSubscriptionValues: the filter values one connection's
// subscriptions hold together (ids, authors, kinds, tag values, over
// every filter): up to the cap a REQ is taken, past it refused with
// "blocked:" and the open ones kept; a replacement counts instead of
// the one it replaces, closing gives values back; the cap is per
// connection.
func TestLimitSubscriptionValues(t *testing.T) {
	t.Parallel()
	const max = 10
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxSubscriptionValues: max}})
	c := relaytest.Dial(t, r.URL)
	k := relaytest.NewKey("limit-values")
	pk := `"` + k.PK.Hex() + `"`
	c.Req("a", `{"authors":[`+pk+`],"kinds":[1,7,30023]}`)            // 4
	c.Req("b", `{"kinds":[1]}`, `{"#t":["x","y"],"#p":[`+pk+`]}`)     // 4: 8
	c.Req("c", `{"ids":["`+strings.Repeat("0", 64)+`"],"kinds":[1]}`) // 2: 10, at the cap
	c.Req("d", `{}`)                                                  // none
	c.SendRaw(`["REQ","e",{"kinds":[1]}]`)
	c.ExpectClosed("e", "blocked: ")
	if v := trips(r, "max_subscription_values"); v != 1 {
		t.Fatalf("max_subscription_values = %d, want 1", v)
	}
	if v := r.Stats().SubscriptionsActive; v != 4 {
		t.Fatalf("subscriptions_active = %d, want 4 (the refused one not counted, the open ones kept)", v)
	}
	// Replacing counts the new filters instead of the old ones.
	c.Req("a", `{"kinds":[1,7,30023,6]}`) // 4 for 4
	// A replacement past the cap: refused, and the id closed with it, as
	// the CLOSED says (its values given back).
	c.SendRaw(`["REQ","a",{"kinds":[1,7,30023,6,5,8,9]}]`)
	c.ExpectClosed("a", "blocked: ")
	if v := r.Stats().SubscriptionsActive; v != 3 {
		t.Fatalf("subscriptions_active = %d, want 3", v)
	}
	c.Req("e", `{"kinds":[1,7,30023,6]}`)
	// Closing gives its values back.
	c.SendRaw(`["CLOSE","c"]`)
	c.Req("f", `{"kinds":[1,7]}`)
	// The cap is per connection.
	relaytest.Dial(t, r.URL).Req("other", `{"kinds":[1,2,3,5,6,7,8,9,10,11]}`)
	if v := trips(r, "max_subscription_values"); v != 2 {
		t.Fatalf("max_subscription_values = %d, want 2", v)
	}
}

func TestLimitFiltersPerReq(t *testing.T) {
	t.Parallel()
	// The filters name every kind up to 200: no read protection (it would
	// answer auth-required for kinds 4 and 14).
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{ProtectedKinds: []int{}}}) // default 200
	c := relaytest.Dial(t, r.URL)
	filters := func(n int) string {
		fs := make([]string, n)
		for i := range fs {
			fs[i] = fmt.Sprintf(`{"kinds":[%d]}`, i)
		}
		return strings.Join(fs, ",")
	}
	c.Req("n", filters(200))
	c.SendRaw(`["REQ","n1",` + filters(201) + `]`)
	c.ExpectClosed("n1", "invalid: ")
	if v := trips(r, "max_filters"); v != 1 {
		t.Fatalf("max_filters = %d, want 1", v)
	}
	if v := trips(r, "max_filter_values"); v != 0 {
		t.Fatalf("max_filter_values = %d, want 0", v)
	}
	// COUNT has the same bound.
	c.SendRaw(`["COUNT","c1",` + filters(201) + `]`)
	c.ExpectClosed("c1", "invalid: ")
	if v := trips(r, "max_filters"); v != 2 {
		t.Fatalf("max_filters = %d, want 2", v)
	}
	expectWorks(t, c)
}

func TestLimitFilterValues(t *testing.T) {
	t.Parallel()
	// No read protection: the kinds lists name every kind up to 1000.
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{ProtectedKinds: []int{}}}) // default 1000
	c := relaytest.Dial(t, r.URL)
	values := func(n int, f func(i int) string) string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = f(i)
		}
		return "[" + strings.Join(vs, ",") + "]"
	}
	hex := func(i int) string { return fmt.Sprintf(`"%064x"`, i) }
	str := func(i int) string { return fmt.Sprintf(`"v%d"`, i) }
	num := func(i int) string { return fmt.Sprint(i) }
	trips0 := int64(0)
	for _, tc := range []struct {
		key string
		f   func(int) string
	}{{"ids", hex}, {"authors", hex}, {"kinds", num}, {"#e", hex}, {"#t", str}} {
		c.Req("n", `{"`+tc.key+`":`+values(1000, tc.f)+`}`)
		c.SendRaw(`["REQ","n1",{"` + tc.key + `":` + values(1001, tc.f) + `}]`)
		c.ExpectClosed("n1", "invalid: ")
		trips0++
		if v := trips(r, "max_filter_values"); v != trips0 {
			t.Fatalf("%s: max_filter_values = %d, want %d", tc.key, v, trips0)
		}
	}
	if v := trips(r, "max_filters"); v != 0 {
		t.Fatalf("max_filters = %d, want 0", v)
	}
	expectWorks(t, c)
}

func TestLimitSubIDLength(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{}) // default 64
	c := relaytest.Dial(t, r.URL)
	id64 := strings.Repeat("x", 64)
	c.Req(id64, `{"kinds":[1]}`)
	c.SendRaw(`["REQ","` + id64 + `y",{"kinds":[1]}]`)
	c.ExpectNotice("invalid: ")
	if v := trips(r, "max_subid_length"); v != 1 {
		t.Fatalf("max_subid_length = %d, want 1", v)
	}
	// Multi-byte characters count in bytes: 32 two-byte runes are 64 bytes.
	c.Req(strings.Repeat("é", 32), `{"kinds":[1]}`)
	c.SendRaw(`["REQ","` + strings.Repeat("é", 32) + `x",{"kinds":[1]}]`)
	c.ExpectNotice("invalid: ")
	if v := trips(r, "max_subid_length"); v != 2 {
		t.Fatalf("max_subid_length = %d, want 2", v)
	}
	if v := r.Stats().SubscriptionsActive; v != 2 {
		t.Fatalf("subscriptions_active = %d, want 2", v)
	}
	expectWorks(t, c)
}

func TestLimitCreatedAtWindow(t *testing.T) {
	t.Parallel()
	alice := relaytest.NewKey("limit-created-at")
	refused := func(c *relaytest.Client, ev *nostr.Event) {
		t.Helper()
		if m := c.Publish(ev); m.OK || !strings.HasPrefix(m.Message, "invalid: ") {
			t.Fatalf("created_at %d: OK %v %q, want false \"invalid: ...\"", ev.CreatedAt, m.OK, m.Message)
		}
	}

	// Defaults: 15 minutes ahead, no bound in the past.
	r := relaytest.Start(t, relaytest.Options{})
	c := relaytest.Dial(t, r.URL)
	now := time.Now().Unix() // the relay's clock reads later, never earlier
	c.MustPublish(alice.Event(1, "+15m", nil, now+15*60))
	refused(c, alice.Event(1, "+16m", nil, now+16*60))
	c.MustPublish(alice.Event(1, "1970", nil, 1))
	if v := trips(r, "created_at_future"); v != 1 {
		t.Fatalf("created_at_future = %d, want 1", v)
	}
	expectWorks(t, c)

	// Configured past bound (1h) and future bound (1m).
	r2 := relaytest.Start(t, relaytest.Options{Relay: relay.Config{CreatedAtPast: time.Hour, CreatedAtFuture: time.Minute}})
	c2 := relaytest.Dial(t, r2.URL)
	now = time.Now().Unix()
	c2.MustPublish(alice.Event(1, "-59m", nil, now-59*60))
	refused(c2, alice.Event(1, "-61m", nil, now-61*60))
	c2.MustPublish(alice.Event(1, "+1m", nil, now+60))
	refused(c2, alice.Event(1, "+2m", nil, now+120))
	if v := trips(r2, "created_at_past"); v != 1 {
		t.Fatalf("created_at_past = %d, want 1", v)
	}
	if v := trips(r2, "created_at_future"); v != 1 {
		t.Fatalf("created_at_future = %d, want 1", v)
	}
	expectWorks(t, c2)

	// A negative future bound switches it off.
	r3 := relaytest.Start(t, relaytest.Options{Relay: relay.Config{CreatedAtFuture: -1}})
	relaytest.Dial(t, r3.URL).MustPublish(alice.Event(1, "+1y", nil, now+365*86400))
}

func TestLimitTags(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{}) // default 2000
	alice := relaytest.NewKey("limit-tags")
	c := relaytest.Dial(t, r.URL)
	tags := func(n int) nostr.Tags {
		ts := make(nostr.Tags, n)
		for i := range ts {
			ts[i] = nostr.Tag{"t", fmt.Sprint(i)}
		}
		return ts
	}
	c.MustPublish(alice.Event(1, "2000 tags", tags(2000), 0))
	before := storedCount(t, r)
	if m := c.Publish(alice.Event(1, "2001 tags", tags(2001), 0)); m.OK || !strings.HasPrefix(m.Message, "invalid: ") {
		t.Fatalf("N+1: OK %v %q, want false \"invalid: ...\"", m.OK, m.Message)
	}
	if v := trips(r, "max_tags"); v != 1 {
		t.Fatalf("max_tags = %d, want 1", v)
	}
	if storedCount(t, r) != before {
		t.Fatal("store changed")
	}
	expectWorks(t, c)
}

func TestLimitContentBytes(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxContentBytes: 100}})
	alice := relaytest.NewKey("limit-content")
	c := relaytest.Dial(t, r.URL)
	c.MustPublish(alice.Event(1, strings.Repeat("c", 100), nil, 0))
	if m := c.Publish(alice.Event(1, strings.Repeat("c", 101), nil, 0)); m.OK || !strings.HasPrefix(m.Message, "invalid: ") {
		t.Fatalf("N+1: OK %v %q, want false \"invalid: ...\"", m.OK, m.Message)
	}
	if v := trips(r, "max_content_bytes"); v != 1 {
		t.Fatalf("max_content_bytes = %d, want 1", v)
	}
	if v := trips(r, "max_tags"); v != 0 {
		t.Fatalf("max_tags = %d, want 0", v)
	}
	expectWorks(t, c)
}

// connectionCap checks a connection cap of n: n connections work, the
// next is refused (closed before the upgrade) and counted, and a place
// frees when one closes.
func connectionCap(t *testing.T, scfg server.Config, limit string, n int) {
	r := relaytest.Start(t, relaytest.Options{Server: scfg})
	var cs []*relaytest.Client
	for i := 0; i < n; i++ {
		cs = append(cs, relaytest.Dial(t, r.URL))
	}
	for _, c := range cs {
		expectWorks(t, c)
	}
	if _, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{}); err == nil {
		t.Fatalf("connection %d was accepted", n+1)
	}
	if v := trips(r, limit); v != 1 {
		t.Fatalf("%s = %d, want 1", limit, v)
	}
	if v := r.Stats().ConnectionsRejected; v != 1 {
		t.Fatalf("connections_rejected = %d, want 1", v)
	}
	for _, c := range cs {
		expectWorks(t, c) // the others are unaffected
	}
	cs[0].Close()
	waitFor(t, "a session to end", func() bool { return r.Stats().ConnectionsActive == int64(n-1) })
	// /stats over HTTP takes the freed slot for its request (once the
	// closed connection released it: slotsActive does not count the
	// asking connection).
	var st map[string]any
	waitFor(t, "a slot to be released", func() bool {
		var err error
		st, err = tryStatsJSON(r) // refused while the slot is still taken
		return err == nil && st["connection_slots_active"].(float64) == float64(n)
	})
	// (Each refused try counted one more trip.)
	if v := st["limits_tripped"].(map[string]any)[limit].(float64); v < 1 || int64(v) != trips(r, limit) {
		t.Fatalf("/stats limits_tripped[%s] = %v, Stats() says %d", limit, v, trips(r, limit))
	}
	waitFor(t, "the HTTP request's slot", func() bool {
		c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{})
		if err != nil {
			return false
		}
		expectWorks(t, c)
		return true
	})
}

func TestLimitConnectionsPerIP(t *testing.T) {
	t.Parallel()
	// The default, 128 (relaytest lifts it unless set, so set it).
	n := server.Config{}.Normalize().MaxConnectionsPerIP
	if n != 128 {
		t.Fatalf("default max_connections_per_ip = %d, want 128", n)
	}
	connectionCap(t, server.Config{MaxConnectionsPerIP: n}, "max_connections_per_ip", n)
}

func TestLimitConnectionsTotal(t *testing.T) {
	t.Parallel()
	connectionCap(t, server.Config{MaxConnections: 3}, "max_connections", 3)
}

// TestLimitPendingEvents: a connection may have MaxPendingEvents EVENTs
// awaiting their OK; one more is refused "rate-limited:". The store's
// commit callbacks are held back so the events stay pending.
func TestLimitPendingEvents(t *testing.T) {
	t.Parallel()
	r, ls := startLagging(t, relaytest.Options{Relay: relay.Config{MaxPendingEvents: 5}})
	gate := make(chan struct{})
	ls.mu.Lock()
	ls.holdAll = gate
	ls.mu.Unlock()
	alice := relaytest.NewKey("limit-pending")
	c := relaytest.Dial(t, r.URL)
	evs := notes(alice, 6, "pending")
	for _, ev := range evs[:5] {
		c.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
	}
	m := c.Publish(evs[5]) // the only answer possible while the 5 are held
	if m.OK || !strings.HasPrefix(m.Message, "rate-limited: ") {
		t.Fatalf("N+1: OK %v %q, want false \"rate-limited: ...\"", m.OK, m.Message)
	}
	if v := trips(r, "max_pending_events"); v != 1 {
		t.Fatalf("max_pending_events = %d, want 1", v)
	}
	close(gate)
	for i := 0; i < 5; i++ {
		if m := c.ExpectType("OK"); !m.OK {
			t.Fatalf("held event: OK false %q", m.Message)
		}
	}
	c.MustPublish(evs[5]) // room again
}

// TestLimitVerifyQueue: with one verifier stuck in the store and a verify
// queue of 2, two more EVENTs wait and the next is refused
// "rate-limited:", on any connection.
func TestLimitVerifyQueue(t *testing.T) {
	t.Parallel()
	r, ls := startLagging(t, relaytest.Options{Relay: relay.Config{VerifyWorkers: 1, VerifyQueue: 2, MaxPendingEvents: 10}})
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	ls.mu.Lock()
	ls.blockSubmit, ls.submitEntered = block, entered
	ls.mu.Unlock()
	alice := relaytest.NewKey("limit-verify")
	evs := notes(alice, 4, "verify")
	c := relaytest.Dial(t, r.URL)
	c.SendRaw(`["EVENT",` + string(evs[0].Raw) + `]`)
	<-entered // the only verifier is now stuck in Submit
	ls.mu.Lock()
	ls.blockSubmit = nil
	ls.mu.Unlock()
	// One connection's messages are handled in order: 1 and 2 are queued
	// before 3 is looked at, and 3's refusal is the first answer.
	c.SendRaw(`["EVENT",` + string(evs[1].Raw) + `]`)
	c.SendRaw(`["EVENT",` + string(evs[2].Raw) + `]`)
	m := c.Publish(evs[3])
	if m.OK || !strings.HasPrefix(m.Message, "rate-limited: ") {
		t.Fatalf("N+1: OK %v %q, want false \"rate-limited: ...\"", m.OK, m.Message)
	}
	if v := trips(r, "verify_queue"); v != 1 {
		t.Fatalf("verify_queue = %d, want 1", v)
	}
	close(block)
	for i := 0; i < 3; i++ {
		if m := c.ExpectType("OK"); !m.OK {
			t.Fatalf("queued event: OK false %q", m.Message)
		}
	}
}

// TestLimitIdleTimeout: a connection that sends nothing and does not
// answer pings is closed once IdleTimeout passes (1001), and counted.
func TestLimitIdleTimeout(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{IdleTimeout: 300 * time.Millisecond}})
	if _, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{NoRead: true}); err != nil {
		t.Fatal(err)
	}
	// (The session may be registered just after the handshake answer.)
	waitFor(t, "the session", func() bool { return r.Stats().ConnectionsTotal == 1 })
	waitFor(t, "the idle connection to be closed", func() bool { return r.Stats().ConnectionsActive == 0 })
	if v := trips(r, "idle_timeout"); v != 1 {
		t.Fatalf("idle_timeout = %d, want 1", v)
	}
}

// TestLimitDrainTimeout: a connection whose out-queue makes no progress
// (the client stopped reading with a stored query pending) is closed once
// DrainTimeout passes, and counted; the relay-wide query budget it held is
// returned.
func TestLimitDrainTimeout(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{
		DrainTimeout: 300 * time.Millisecond, IdleTimeout: -1, QueryBytesPerConn: 64 << 10}})
	alice := relaytest.NewKey("limit-drain")
	seed(t, r, bigNotes(alice, 300, sizeFor(t, overflowBytes(t, 64<<10), 300, 20000, 60000), "drain"))
	c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Paused: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	sendReq(t, c, "big", authorFilter(alice, ""))
	waitFor(t, "the session", func() bool { return r.Stats().ConnectionsTotal == 1 })
	waitFor(t, "the stuck connection to be closed", func() bool { return r.Stats().ConnectionsActive == 0 })
	if v := trips(r, "drain_timeout"); v != 1 {
		t.Fatalf("drain_timeout = %d, want 1", v)
	}
	if v := r.Stats().QueryBytesQueued; v != 0 {
		t.Fatalf("query_bytes_queued = %d after the close, want 0", v)
	}
}

// TestLimitControlBacklog: control frames (OK, NOTICE, CLOSED...) are never
// dropped, but a client that lets more than 4*OutQueueBytes of them pile
// up (it stopped reading and the socket is full) is disconnected.
func TestLimitControlBacklog(t *testing.T) {
	t.Parallel()
	const outBytes = 1024
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{OutQueueBytes: outBytes, QueryBytesPerConn: 64 << 10}})
	alice := relaytest.NewKey("limit-backlog")
	seed(t, r, bigNotes(alice, 300, sizeFor(t, overflowBytes(t, 64<<10), 300, 20000, 60000), "backlog"))
	c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Paused: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	// Fill the socket and the out-queue with a stored query...
	sendReq(t, c, "big", authorFilter(alice, ""))
	waitFor(t, "the query to pause", func() bool { return trips(r, "query_bytes_per_conn") >= 1 })
	// ...then ask for answers that cannot leave, until they pile up.
	expectBacklogClose(t, r, c, websocket.TextMessage, []byte(`["NOPE"]`), outBytes)
}

// expectBacklogClose sends msg (of WebSocket message type mt) on c, whose
// client does not read, until the relay closes it for its control backlog
// (the kernel may still take some bytes for a while: keep sending), and
// checks the control queue stayed within 4*outBytes plus one frame.
func expectBacklogClose(t *testing.T, r *relaytest.Relay, c *relaytest.Client, mt int, msg []byte, outBytes int) {
	t.Helper()
	deadline := time.Now().Add(relaytest.DefaultTimeout)
	for trips(r, "control_backlog") == 0 && time.Now().Before(deadline) {
		if err := c.WriteMessage(mt, msg); err != nil {
			break // closed
		}
	}
	waitFor(t, "the connection to be closed", func() bool { return r.Stats().ConnectionsActive == 0 })
	if v := trips(r, "control_backlog"); v != 1 {
		t.Fatalf("control_backlog = %d, want 1", v)
	}
	if q := r.Relay.QueueStats(); q.PeakControlBytes > 4*outBytes+200 {
		t.Fatalf("control queue peaked at %d bytes, bound %d plus one frame", q.PeakControlBytes, 4*outBytes)
	}
}

// TestLimitControlBacklogPings: pongs are control frames too: a client
// that pings without reading is disconnected once they pile up, not
// answered without bound (a flood of a million pings grew the relay by
// 158 MiB).
func TestLimitControlBacklogPings(t *testing.T) {
	t.Parallel()
	const outBytes = 1024
	ping := bytes.Repeat([]byte("p"), 125)
	// Within the bound (the default 1 MiB out-queue: 4 MiB of pongs), a
	// burst of 5,000 pings is answered.
	d := relaytest.Start(t, relaytest.Options{})
	reader := relaytest.Dial(t, d.URL)
	for range 5000 {
		if err := reader.WriteMessage(websocket.PingMessage, ping); err != nil {
			t.Fatal(err)
		}
	}
	if evs := reader.Req("after-pings", `{"limit":1}`); len(evs) != 0 || trips(d, "control_backlog") != 0 {
		t.Fatalf("a client after 5,000 pings: %d events, control_backlog %d", len(evs), trips(d, "control_backlog"))
	}

	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{OutQueueBytes: outBytes}})
	c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Paused: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	expectBacklogClose(t, r, c, websocket.PingMessage, ping, outBytes)
}

// TestLimitInflightEvents: the relay-wide cap on EVENTs admitted and not
// yet answered: with commits held, N events on two connections are
// admitted, the next (on either) is refused "rate-limited:" and counted
// (or "error:", uncounted, while the store reports its database down),
// and once the store answers there is room again.
func TestLimitInflightEvents(t *testing.T) {
	t.Parallel()
	r, ls := startLagging(t, relaytest.Options{Relay: relay.Config{MaxInflightEvents: 4}})
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the relay's shutdown, which waits for the commits
	ls.mu.Lock()
	ls.holdAll = gate
	ls.mu.Unlock()
	alice := relaytest.NewKey("limit-inflight")
	evs := notes(alice, 6, "inflight")
	c1, c2 := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	for _, ev := range evs[:2] {
		c1.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
	}
	for _, ev := range evs[2:4] {
		c2.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
	}
	waitFor(t, "4 events in flight", func() bool { return r.Relay.InflightEvents() == 4 })
	m := c1.Publish(evs[4]) // N+1 on a connection far below its own cap
	if m.OK || !strings.HasPrefix(m.Message, "rate-limited: ") {
		t.Fatalf("N+1: OK %v %q, want false \"rate-limited: ...\"", m.OK, m.Message)
	}
	if v := trips(r, "max_inflight_events"); v != 1 {
		t.Fatalf("max_inflight_events = %d, want 1", v)
	}
	// While the store reports its database unreachable, the cap is full
	// because the writer waits on it: a stored event is told so
	// ("error:"), not counted as a trip; an ephemeral one, which needs no
	// store, is still refused for room.
	ls.unavailable.Store(true)
	errorsBefore := r.Stats().EventsRejected["error"]
	m = c1.Publish(evs[4])
	if m.OK || m.Message != "error: the store is unavailable, try again later" {
		t.Fatalf("N+1 with the store unavailable: OK %v %q, want false \"error: the store is unavailable, ...\"", m.OK, m.Message)
	}
	eph := alice.Event(20001, "inflight ephemeral", nil, time.Now().Unix())
	if m := c1.Publish(eph); m.OK || !strings.HasPrefix(m.Message, "rate-limited: ") {
		t.Fatalf("ephemeral N+1 with the store unavailable: OK %v %q, want false \"rate-limited: ...\"", m.OK, m.Message)
	}
	if v, e := trips(r, "max_inflight_events"), r.Stats().EventsRejected["error"]-errorsBefore; v != 2 || e != 1 {
		t.Fatalf("max_inflight_events = %d, events_rejected[error] +%d; want 2 (the ephemeral event's) and +1", v, e)
	}
	ls.unavailable.Store(false)
	release()
	for _, c := range []*relaytest.Client{c1, c2} {
		for i := 0; i < 2; i++ {
			if m := c.ExpectType("OK"); !m.OK {
				t.Fatalf("held event: OK false %q", m.Message)
			}
		}
	}
	waitFor(t, "nothing in flight", func() bool { return r.Relay.InflightEvents() == 0 })
	c2.MustPublish(evs[5])
}

// TestDrainTimeoutCountsFromFirstPendingFrame: a connection idle for
// longer than DrainTimeout that then has a frame waiting (here the
// sweeper's own ping) is not "stuck": the drain deadline counts from when
// output started waiting, not from the last write. (Found with petrel
// bench conns: 558 of 19,000 idle subscribers were closed at their first
// ping.)
func TestDrainTimeoutCountsFromFirstPendingFrame(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{
		DrainTimeout: 200 * time.Millisecond, IdleTimeout: 1200 * time.Millisecond}})
	const n = 20
	clients := make([]*relaytest.Client, n)
	for i := range clients {
		clients[i] = relaytest.Dial(t, r.URL)
		clients[i].Req("s", `{"kinds":[1],"limit":0}`)
	}
	// Past half the idle timeout every connection is pinged (the test
	// client answers with a pong), long after its last write.
	time.Sleep(1000 * time.Millisecond)
	alice := relaytest.NewKey("drain-ping")
	ev := alice.Note("still here?")
	relaytest.Dial(t, r.URL).MustPublish(ev)
	for i, c := range clients {
		if m := c.ExpectType("EVENT"); m.Event.ID != ev.ID {
			t.Fatalf("client %d: got %s", i, m.Event.ID.Hex())
		}
	}
	if v := trips(r, "drain_timeout"); v != 0 {
		t.Fatalf("drain_timeout = %d, want 0", v)
	}
}

// badSig returns ev with its signature broken (the id still matches, so
// only the verifier refuses it).
func badSig(k relaytest.Key, content string) *nostr.Event {
	ev := k.Note(content)
	ev.Sig[7] ^= 1
	ev.Raw = nostr.Serialize(ev)
	return ev
}

// TestLimitBadSignatures: a connection sending invalid signatures in a row
// is slowed from a tenth of MaxBadSignatures on (one EVENT awaiting its OK
// at a time; a second is refused "rate-limited:"), a valid signature lifts
// that, and at MaxBadSignatures in a row it is closed (1008), counted.
func TestLimitBadSignatures(t *testing.T) {
	t.Parallel()
	const limit = 20 // slowed from 2 on
	// One verifier, kept busy by another connection while the slowed pair
	// is sent, so that the first of the pair is likely still waiting when
	// the second arrives (tried again when it was not: see below).
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxBadSignatures: limit, VerifyWorkers: 1}})
	alice := relaytest.NewKey("bad-sigs")
	c := relaytest.Dial(t, r.URL)
	expectBad := func(ev *nostr.Event) {
		t.Helper()
		if m := c.Publish(ev); m.OK || !strings.HasPrefix(m.Message, "invalid: ") {
			t.Fatalf("bad signature: %s %q", describe(m), m.Message)
		}
	}
	// One bad signature: not slowed, two pipelined events both taken.
	expectBad(badSig(alice, "bad 0"))
	pipelined := func(evs ...*nostr.Event) []*nostr.RelayMessage {
		t.Helper()
		for _, ev := range evs {
			c.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
		}
		var out []*nostr.RelayMessage
		for range evs {
			out = append(out, c.ExpectType("OK"))
		}
		return out
	}
	if ms := pipelined(alice.Note("ok 1"), alice.Note("ok 2")); !ms[0].OK || !ms[1].OK {
		t.Fatalf("before the slow-down: %s, %s", describe(ms[0]), describe(ms[1]))
	}
	// Two in a row (a tenth of 20): slowed; the second of a pipelined pair
	// is refused. "Pipelined" means the second arrives while the first
	// still awaits its verdict, which the verifier kept busy by another
	// connection makes likely but a loaded machine (-race in CI) does not
	// make sure: if the first was answered before the second was read, the
	// relay rightly takes the second (it is valid, and lifts the slow-down).
	// So the pair is tried again, from two fresh bad signatures, until it
	// overlaps; a relay that never refuses fails after the last try.
	other := relaytest.Dial(t, r.URL)
	otherKey := relaytest.NewKey("bad-sigs-other")
	const tries = 8
	var refused *nostr.RelayMessage
	for try := 0; try < tries && refused == nil; try++ {
		expectBad(badSig(alice, fmt.Sprint("bad 1 try ", try)))
		expectBad(badSig(alice, fmt.Sprint("bad 2 try ", try)))
		first, second := badSig(alice, fmt.Sprint("bad 3 try ", try)), alice.Note(fmt.Sprint("refused while slowed, try ", try))
		busy := notes(otherKey, 200, fmt.Sprint("keeping the verifier busy, try ", try))
		for _, ev := range busy {
			other.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
		}
		ms := pipelined(first, second)
		for range busy {
			if m := other.ExpectType("OK"); !m.OK {
				t.Fatalf("the other connection: %s", describe(m))
			}
		}
		for _, m := range ms {
			switch {
			case m.EventID == first.ID && (m.OK || !strings.HasPrefix(m.Message, "invalid: ")):
				t.Fatalf("the bad one of the pair: %s %q", describe(m), m.Message)
			case m.EventID == second.ID && !m.OK && !strings.HasPrefix(m.Message, "rate-limited: "):
				t.Fatalf("the valid one of the pair: %s %q", describe(m), m.Message)
			case m.EventID == second.ID && !m.OK:
				refused = m
			case m.EventID == second.ID:
				t.Logf("try %d: the first of the pair was answered before the second was read; again", try)
			}
		}
	}
	if refused == nil {
		t.Fatalf("slowed: the second of a pipelined pair was taken in all %d tries", tries)
	}
	// A valid signature lifts it.
	c.MustPublish(alice.Note("valid again"))
	if ms := pipelined(alice.Note("ok 3"), alice.Note("ok 4")); !ms[0].OK || !ms[1].OK {
		t.Fatalf("after a valid one: %s, %s", describe(ms[0]), describe(ms[1]))
	}
	// limit-1 in a row: still open. The limit-th: closed, counted.
	for i := 0; i < limit-1; i++ {
		expectBad(badSig(alice, fmt.Sprint("run ", i)))
	}
	expectWorks(t, c)
	if v := trips(r, "bad_signatures"); v != 0 {
		t.Fatalf("bad_signatures = %d before the limit", v)
	}
	c.SendRaw(`["EVENT",` + string(badSig(alice, "the last").Raw) + `]`)
	if code := c.WaitClosed(relaytest.DefaultTimeout); code != 1008 {
		t.Fatalf("close code %d, want 1008", code)
	}
	if v := trips(r, "bad_signatures"); v != 1 {
		t.Fatalf("bad_signatures = %d, want 1", v)
	}
}

// TestBadSignatureFloodDoesNotStarve: one connection pipelining 1,000
// events with invalid signatures cannot take the verify capacity from
// another publisher: every valid event of the other is accepted, and the
// flooding connection is closed. A small verify queue and one verifier
// make the flood fill the queue if a connection may (as it could when
// its pending cap was above the queue).
func TestBadSignatureFloodDoesNotStarve(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{VerifyQueue: 64, VerifyWorkers: 1}})
	mallory, alice := relaytest.NewKey("flood-mallory"), relaytest.NewKey("flood-alice")
	flood := relaytest.Dial(t, r.URL)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1000; i++ {
			if err := flood.WriteMessage(websocket.TextMessage, []byte(`["EVENT",`+string(badSig(mallory, fmt.Sprint("flood ", i)).Raw)+`]`)); err != nil {
				return // closed by the relay
			}
		}
	}()
	pub := relaytest.Dial(t, r.URL)
	evs := notes(alice, 300, "honest")
	oks, _ := publishAll(t, pub, evs, 8)
	mustAllOK(t, evs, oks)
	<-done
	if code := flood.WaitClosed(relaytest.DefaultTimeout); code != 1008 {
		t.Fatalf("flooding connection: close code %d, want 1008", code)
	}
	if v := trips(r, "bad_signatures"); v != 1 {
		t.Fatalf("bad_signatures = %d, want 1", v)
	}
}

// fakeClock is a relay clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// TestLimitEventWait: the time valve (MaxEventWait). With commits held
// and the relay's clock moved by hand: while the last answered EVENT
// waited exactly the bound, with others still in flight, a new EVENT is
// admitted; once the last answered one waited just past it, the next is
// refused "rate-limited:" and counted in max_event_wait, far below every
// count valve; once the pipeline empties, EVENTs are admitted again.
func TestLimitEventWait(t *testing.T) {
	t.Parallel()
	const bound = time.Second
	start := time.Now()
	clk := &fakeClock{now: start}
	r, ls := startLagging(t, relaytest.Options{Now: clk.Now, Relay: relay.Config{MaxEventWait: bound}})
	alice := relaytest.NewKey("limit-event-wait")
	evs := notes(alice, 5, "wait")
	gates := make([]chan struct{}, 3)
	ls.mu.Lock()
	for i := range gates {
		gates[i] = make(chan struct{})
		ls.hold[evs[i].ID] = gates[i]
	}
	ls.mu.Unlock()
	c1, c2 := relaytest.Dial(t, r.URL), relaytest.Dial(t, r.URL)
	c1.SendRaw(`["EVENT",` + string(evs[0].Raw) + `]`)
	c1.SendRaw(`["EVENT",` + string(evs[1].Raw) + `]`)
	waitFor(t, "2 events in flight", func() bool { return r.Relay.InflightEvents() == 2 })

	// At the bound: evs[0] answered after exactly the bound, evs[1] waits.
	clk.Set(start.Add(bound))
	close(gates[0])
	if m := c1.ExpectType("OK"); !m.OK || m.EventID != evs[0].ID {
		t.Fatalf("first held event: %+v", m)
	}
	c2.SendRaw(`["EVENT",` + string(evs[2].Raw) + `]`)
	waitFor(t, "the event at the bound admitted", func() bool { return r.Relay.InflightEvents() == 2 })
	if v := trips(r, "max_event_wait"); v != 0 {
		t.Fatalf("max_event_wait = %d at the bound, want 0", v)
	}

	// Just past it: evs[1] answered after the bound and a nanosecond,
	// evs[2] still waits.
	clk.Set(start.Add(bound + 1))
	close(gates[1])
	if m := c1.ExpectType("OK"); !m.OK || m.EventID != evs[1].ID {
		t.Fatalf("second held event: %+v", m)
	}
	m := c1.Publish(evs[3])
	if m.OK || !strings.HasPrefix(m.Message, "rate-limited: ") {
		t.Fatalf("past the bound: OK %v %q, want false \"rate-limited: ...\"", m.OK, m.Message)
	}
	if v := trips(r, "max_event_wait"); v != 1 {
		t.Fatalf("max_event_wait = %d, want 1", v)
	}

	// The pipeline empties: no standing wait, EVENTs are admitted.
	close(gates[2])
	if m := c2.ExpectType("OK"); !m.OK || m.EventID != evs[2].ID {
		t.Fatalf("third held event: %+v", m)
	}
	waitFor(t, "nothing in flight", func() bool { return r.Relay.InflightEvents() == 0 })
	c1.MustPublish(evs[4])
	c1.MustPublish(evs[3])
}
