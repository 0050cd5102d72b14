package relay_test

// Bad input: every malformed or refused message gets the right answer
// (OK false, CLOSED, NOTICE or a close code), the connection survives when
// it should, and the store is unaffected.

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

func TestBadInputAnswers(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("bad-alice")
	c := relaytest.Dial(t, r.URL)
	c.MustPublish(alice.Note("already stored"))
	stored := storedCount(t, r)

	good := alice.Note("a good event, never sent as is")
	// Events with one thing wrong, all by alice.
	wrongID := *good
	wrongID.ID[0] ^= 1
	wrongID.Raw = nostr.Serialize(&wrongID)
	badSig := *good
	badSig.Sig[10] ^= 1
	badSig.Raw = nostr.Serialize(&badSig)
	otherKey := *good // signed by alice, claims bob's pubkey
	otherKey.PubKey = relaytest.NewKey("bad-bob").PK
	otherKey.ID = nostr.ComputeID(&otherKey)
	otherKey.Raw = nostr.Serialize(&otherKey)
	future := alice.Event(1, "from the future", nil, time.Now().Unix()+3600)
	upper := strings.Replace(string(good.Raw), good.ID.Hex(), strings.ToUpper(good.ID.Hex()), 1)
	authKind := alice.Event(nostr.KindClientAuth, "", nostr.Tags{{"challenge", "x"}}, 0)

	// answer: "OK" (OK false with the prefix, for id), "CLOSED" (for sub),
	// "NOTICE" (message starts with the prefix).
	type answer struct {
		typ, sub, prefix string
		id               nostr.ID
	}
	notice := answer{typ: "NOTICE", prefix: "invalid: "}
	closed := func(sub string) answer { return answer{typ: "CLOSED", sub: sub, prefix: "invalid: "} }
	okFalse := func(ev *nostr.Event) answer { return answer{typ: "OK", prefix: "invalid: ", id: ev.ID} }

	f := func(msg string, want answer) {
		t.Helper()
		c.SendRaw(msg)
		m := c.Read()
		if m.Type != want.typ || !strings.HasPrefix(m.Message, want.prefix) ||
			(want.typ == "CLOSED" && m.SubID != want.sub) ||
			(want.typ == "OK" && (m.OK || m.EventID != want.id)) {
			t.Fatalf("%.80s: got %s, want %s %q %q", msg, describe(m), want.typ, want.sub, want.prefix)
		}
		expectWorks(t, c) // the connection survives, nothing else came
	}
	f(`not json`, notice)
	f(`[`, notice)
	f(`{}`, notice)
	f(`[]`, notice)
	f(`""`, notice)
	f(`[1,2]`, notice)
	f(`["EVENT"]`, notice)
	f(`["EVENT",1]`, notice)
	f(`["EVENT",{}]`, notice)
	f(`["REQ"]`, notice)
	f(`["REQ",1,{}]`, notice)
	f(`["REQ","",{}]`, notice)
	f(`["REQ","x"]`, closed("x"))
	f(`["REQ","x",1]`, closed("x"))
	f(`["REQ","x",{"kinds":"1"}]`, closed("x"))
	f(`["REQ","x",{"ids":["zz"]}]`, closed("x"))
	f(`["REQ","x",{"authors":["`+strings.ToUpper(alice.PK.Hex())+`"]}]`, closed("x"))
	f(`["REQ","x",{"#e":"not a list"}]`, closed("x"))
	f(`["REQ","x",{"limit":-1}]`, closed("x"))
	f(`["REQ","x",{}] trailing`, closed("x"))
	f(`["COUNT","x"]`, closed("x"))
	f(`["CLOSE"]`, notice)
	f(`["CLOSE",1]`, notice)
	f(`["CLOSE","x","y"]`, notice)
	f(`["FOO","x"]`, notice)
	f(`["event",{}]`, notice) // labels are case-sensitive
	f(`["EVENT",`+string(good.Raw)+`,1]`, okFalse(good))
	f(`["EVENT",`+string(wrongID.Raw)+`]`, okFalse(&wrongID))
	f(`["EVENT",`+string(badSig.Raw)+`]`, okFalse(&badSig))
	f(`["EVENT",`+string(otherKey.Raw)+`]`, okFalse(&otherKey))
	f(`["EVENT",`+string(future.Raw)+`]`, okFalse(future))
	f(`["EVENT",`+string(authKind.Raw)+`]`, okFalse(authKind))
	f(`["EVENT",`+upper+`]`, notice) // the id is unreadable: no OK possible
	f(`["EVENT",`+strings.Replace(string(good.Raw), `"kind":1`, `"kind":70000`, 1)+`]`, okFalse(good))
	f(`["EVENT",`+strings.Replace(string(good.Raw), `"tags":[]`, `"tags":[1]`, 1)+`]`, okFalse(good))
	// The id last, after the malformed field: the parser refuses before it
	// reads the id, and the relay still answers with an OK naming it.
	idLast := func(field string) string {
		fields := map[string]string{
			"pubkey": `"` + good.PubKey.Hex() + `"`, "created_at": "1700000000", "kind": "1",
			"tags": "[]", "content": `"x"`, "sig": `"` + good.Sig.Hex() + `"`,
		}
		name, value, _ := strings.Cut(field, ":")
		fields[strings.Trim(name, `"`)] = value
		var b strings.Builder
		b.WriteString(`["EVENT",{`)
		for _, k := range []string{"kind", "created_at", "tags", "content", "pubkey", "sig"} {
			b.WriteString(`"` + k + `":` + fields[k] + `,`)
		}
		b.WriteString(`"id":"` + good.ID.Hex() + `"}]`)
		return b.String()
	}
	for _, field := range []string{
		`"kind":"1"`, `"kind":1.5`, `"kind":-1`, `"kind":1180591620717411303424`,
		`"created_at":"1"`, `"created_at":1e20`, `"created_at":-5`,
		`"tags":"x"`, `"tags":[["p",1]]`, `"tags":[["p",null]]`, `"tags":[{}]`,
		`"content":5`, `"pubkey":"` + strings.ToUpper(good.PubKey.Hex()) + `"`, `"content":"\ud800"`,
		`"tags":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		`"tags":[` + strings.TrimSuffix(strings.Repeat(`["t","x"],`, 2001), ",") + `]`,
	} {
		f(idLast(field), okFalse(good))
	}
	c.SendRaw(`["EVENT"]`)
	if m := c.Read(); m.Type != "NOTICE" || m.Message != "invalid: EVENT: missing event" {
		t.Fatalf(`["EVENT"]: got %s %q`, describe(m), m.Message)
	}

	// The sig check happens after the cheap checks, on a verifier: the
	// connection keeps working meanwhile and the answer is an OK.
	if n := storedCount(t, r); n != stored {
		t.Fatalf("store changed: %d events, want %d", n, stored)
	}
	st := r.Stats()
	if st.EventsAccepted != 1 {
		t.Fatalf("events_accepted = %d, want 1", st.EventsAccepted)
	}
	if st.EventsRejected["invalid"] < 10 {
		t.Fatalf("events_rejected[invalid] = %d, want >= 10", st.EventsRejected["invalid"])
	}
	// (The last barrier's CLOSE may still be on its way.)
	waitFor(t, "subscriptions_active 0", func() bool { return r.Stats().SubscriptionsActive == 0 })
	// And a good event still works on the same connection.
	c.MustPublish(good)
}

func TestBadInputFrames(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	alice := relaytest.NewKey("bad-frames")
	pub := relaytest.Dial(t, r.URL)
	pub.MustPublish(alice.Note("stored"))
	stored := storedCount(t, r)

	// Binary frame: NOTICE, connection survives.
	c := relaytest.Dial(t, r.URL)
	if err := c.WriteMessage(websocket.BinaryMessage, []byte(`["REQ","x",{}]`)); err != nil {
		t.Fatal(err)
	}
	c.ExpectNotice("invalid: ")
	expectWorks(t, c)

	// Invalid UTF-8 in a text frame: close 1007.
	bad, _ := hex.DecodeString("5b22524551222c2278222c7b7d5dff") // ["REQ","x",{}] + 0xff
	c2 := relaytest.Dial(t, r.URL)
	if err := c2.WriteMessage(websocket.TextMessage, bad); err != nil {
		t.Fatal(err)
	}
	if code := c2.WaitClosed(relaytest.DefaultTimeout); code != relay.CloseInvalidData {
		t.Fatalf("invalid UTF-8: close code %d, want %d", code, relay.CloseInvalidData)
	}
	// Invalid UTF-8 inside an event's content, escaped or not.
	c3 := relaytest.Dial(t, r.URL)
	ev := alice.Note("x")
	raw := strings.Replace(string(ev.Raw), `"content":"x"`, "\"content\":\"\xc3\x28\"", 1)
	_ = c3.WriteMessage(websocket.TextMessage, []byte(`["EVENT",`+raw+`]`))
	if code := c3.WaitClosed(relaytest.DefaultTimeout); code != relay.CloseInvalidData {
		t.Fatalf("invalid UTF-8 in content: close code %d, want %d", code, relay.CloseInvalidData)
	}

	// A frame over the limit: close 1009.
	c4 := relaytest.Dial(t, r.URL)
	_ = writeFrameErr(c4, 0x1, []byte(paddedReq(t, "big", r.Relay.Config().MaxMessageBytes+1)))
	if code := c4.WaitClosed(relaytest.DefaultTimeout); code != relay.CloseTooBig {
		t.Fatalf("frame over the limit: close code %d, want %d", code, relay.CloseTooBig)
	}

	// A reserved opcode fails the connection (nbio drops it without a
	// close frame: 1006 on the client side; 1002 would be fine too).
	c5 := relaytest.Dial(t, r.URL)
	_ = writeFrameErr(c5, 0x3, []byte("?"))
	if code := c5.WaitClosed(relaytest.DefaultTimeout); code != relay.CloseProtocolError && code != websocket.CloseAbnormalClosure {
		t.Fatalf("reserved opcode: close code %d, want %d or %d", code, relay.CloseProtocolError, websocket.CloseAbnormalClosure)
	}

	if n := storedCount(t, r); n != stored {
		t.Fatalf("store changed: %d events, want %d", n, stored)
	}
	// The relay is fine for everyone else.
	expectWorks(t, pub)
	expectWorks(t, c)
	waitFor(t, "closed connections to be released", func() bool { return r.Stats().ConnectionsActive == 2 })
}

// TestPipelinedForgeries sends a burst of notes without waiting, some with
// forged signatures, so that the verifier takes them from its queue in
// batches: each forgery gets "invalid: bad signature", every other note
// OK true, and only those are stored.
func TestPipelinedForgeries(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{VerifyWorkers: 1}})
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, r.URL)
	events := notes(alice, 100, "burst")
	forged := map[nostr.ID]bool{}
	for i, ev := range events {
		if i%7 == 3 || i == len(events)-1 {
			ev.Sig[i%64] ^= 1
			ev.Raw = nostr.Serialize(ev)
			forged[ev.ID] = true
		}
	}
	oks, rest := publishAll(t, c, events, len(events))
	if len(rest) != 0 {
		t.Fatalf("unexpected messages: %s", describe(rest[0]))
	}
	for _, ev := range events {
		m := oks[ev.ID]
		switch {
		case forged[ev.ID] && (m.OK || m.Message != "invalid: bad signature"):
			t.Errorf("forged %.12s: %s", ev.ID.Hex(), describe(m))
		case !forged[ev.ID] && !m.OK:
			t.Errorf("valid %.12s: %s", ev.ID.Hex(), describe(m))
		}
	}
	if n, want := storedCount(t, r), int64(len(events)-len(forged)); n != want {
		t.Fatalf("stored %d events, want %d", n, want)
	}
}
