package client_test

// The Conn's delivery rules against a scripted WebSocket server, which can
// send what a relay would not: garbage, oversized frames, messages for no
// subscription, close codes, answers held back on cue.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// script starts a WebSocket server that runs serve on each connection
// and returns its ws:// URL.
func script(t *testing.T, serve func(ws *websocket.Conn)) string {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		serve(ws)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// afterRequest returns a script that waits for the client's first frame,
// then writes frames, then waits for the client to go.
func afterRequest(frames ...string) func(ws *websocket.Conn) {
	return func(ws *websocket.Conn) {
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		for _, f := range frames {
			if err := ws.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
				return
			}
		}
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}
}

// notices returns n NOTICE frames "notice <i>".
func notices(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`["NOTICE","notice %d"]`, i)
	}
	return out
}

// expectEOSE reads the next message of s and fails unless it is EOSE.
func expectEOSE(t *testing.T, s *client.Sub) {
	t.Helper()
	if m, err := s.Next(ctx(t)); err != nil || m.Type != nostr.LabelEOSE {
		t.Fatalf("want EOSE: %+v %v", m, err)
	}
}

// TestInboxRouting: what nobody registered for reaches the inbox in
// arrival order (an unparseable frame with its error and raw bytes), and
// the Sub gets only its own messages.
func TestInboxRouting(t *testing.T) {
	t.Parallel()
	ev := relaytest.NewKey("client-inbox").Note("x")
	url := script(t, afterRequest(
		`not json`,
		`["NOTICE","hello"]`,
		`["EVENT","other",`+string(ev.Raw)+`]`,
		`["EVENT","s",`+string(ev.Raw)+`]`,
		`["OK","`+ev.ID.Hex()+`",true,""]`,
		`["AUTH","challenge-1"]`,
		`["EOSE","s"]`,
	))
	c := dial(t, url, client.Options{})
	sub, err := c.Req("s", nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := sub.Next(ctx(t)); err != nil || m.Type != nostr.LabelEvent || m.Event.ID != ev.ID {
		t.Fatalf("sub: %+v %v", m, err)
	}
	expectEOSE(t, sub)
	next := func() *client.Message {
		t.Helper()
		m, err := c.Next(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := next(); m.Relay != nil || string(m.Raw) != "not json" || m.Err == nil {
		t.Fatalf("garbage: %+v", m)
	}
	want := []string{"NOTICE hello", "EVENT other", "OK ", "AUTH challenge-1"}
	for _, w := range want {
		m := next()
		got := m.Relay.Type + " " + m.Relay.Message + m.Relay.SubID
		if m.Err != nil || got != w {
			t.Fatalf("inbox: %q, want %q", got, w)
		}
	}
	if c.Challenge() != "challenge-1" || c.Stats().Dropped != 0 {
		t.Fatalf("challenge %q, stats %+v", c.Challenge(), c.Stats())
	}
}

// TestInboxSize: the inbox holds InboxSize messages; the next one is
// dropped and counted.
func TestInboxSize(t *testing.T) {
	t.Parallel()
	f := func(n int, dropped int64) {
		t.Helper()
		url := script(t, afterRequest(append(notices(n), `["EOSE","s"]`)...))
		c := dial(t, url, client.Options{InboxSize: 3})
		sub, err := c.Req("s", nostr.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		expectEOSE(t, sub) // after every notice: the reader is serial
		if s := c.Stats(); s.Dropped != dropped {
			t.Fatalf("%d notices: dropped %d, want %d", n, s.Dropped, dropped)
		}
		for i := range min(n, 3) {
			m := <-c.Inbox()
			if m.Relay.Message != fmt.Sprintf("notice %d", i) {
				t.Fatalf("inbox %d: %q", i, m.Relay.Message)
			}
		}
		if len(c.Inbox()) != 0 {
			t.Fatalf("%d left in the inbox", len(c.Inbox()))
		}
	}
	f(3, 0)
	f(4, 1)
}

// TestInboxWait: with InboxWait nothing is dropped: the reader waits for
// the inbox's reader.
func TestInboxWait(t *testing.T) {
	t.Parallel()
	url := script(t, afterRequest(append(notices(20), `["EOSE","s"]`)...))
	c := dial(t, url, client.Options{InboxSize: 1, InboxWait: true})
	sub, err := c.Req("s", nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		m, err := c.Next(ctx(t))
		if err != nil || m.Relay.Message != fmt.Sprintf("notice %d", i) {
			t.Fatalf("inbox %d: %+v %v", i, m, err)
		}
	}
	expectEOSE(t, sub)
	if s := c.Stats(); s.Dropped != 0 {
		t.Fatalf("dropped %d", s.Dropped)
	}
}

// TestMaxMessageSize: a message of MaxMessageSize bytes is read; one byte
// more ends the connection with an error saying so.
func TestMaxMessageSize(t *testing.T) {
	t.Parallel()
	notice := `["NOTICE","` + strings.Repeat("x", 1000) + `"]`
	f := func(limit int64, ok bool) {
		t.Helper()
		url := script(t, afterRequest(notice, `["EOSE","s"]`))
		c := dial(t, url, client.Options{MaxMessageSize: limit})
		sub, err := c.Req("s", nostr.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = sub.Next(ctx(t))
		if ok {
			if err != nil {
				t.Fatalf("limit %d: %v", limit, err)
			}
			if m, err := c.Next(ctx(t)); err != nil || len(m.Raw) != len(notice) {
				t.Fatalf("limit %d: inbox %+v %v", limit, m, err)
			}
			return
		}
		if !errors.Is(err, client.ErrClosed) || !errors.Is(err, websocket.ErrReadLimit) {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if m, err := c.Next(ctx(t)); m != nil || !errors.Is(err, websocket.ErrReadLimit) {
			t.Fatalf("limit %d: inbox after the end: %+v %v", limit, m, err)
		}
	}
	f(int64(len(notice)), true)
	f(int64(len(notice))-1, false)
}

// TestRelayCloses: when the relay closes the connection, Done closes, Err
// carries the close code, the Sub's channel and the inbox are closed after
// their messages, and every later call fails with the same error.
func TestRelayCloses(t *testing.T) {
	t.Parallel()
	url := script(t, func(ws *websocket.Conn) {
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		_ = ws.WriteMessage(websocket.TextMessage, []byte(`["EOSE","s"]`))
		_ = ws.WriteMessage(websocket.TextMessage, []byte(`["NOTICE","bye"]`))
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "going"))
		_, _, _ = ws.ReadMessage()
	})
	c := dial(t, url, client.Options{})
	sub, err := c.Req("s", nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	var ce *websocket.CloseError
	if err := c.Err(); !errors.Is(err, client.ErrClosed) || !errors.As(err, &ce) || ce.Code != 4000 {
		t.Fatalf("Err: %v", err)
	}
	expectEOSE(t, sub)
	if _, err := sub.Next(ctx(t)); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Sub after the end: %v", err)
	}
	if m, err := c.Next(ctx(t)); err != nil || m.Relay.Message != "bye" {
		t.Fatalf("inbox: %+v %v", m, err)
	}
	if _, ok := <-c.Inbox(); ok {
		t.Fatal("inbox not closed")
	}
	ev := relaytest.NewKey("client-closed").Note("late")
	if _, err := c.Req("t", nostr.Filter{}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Req: %v", err)
	}
	if _, err := c.Publish(ctx(t), ev); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Publish: %v", err)
	}
	if err := c.SendRaw([]byte(`["CLOSE","s"]`)); !errors.Is(err, client.ErrClosed) || !errors.As(err, &ce) {
		t.Fatalf("SendRaw on an ended connection: %v", err)
	}
}

// TestCloseWhileBlocked: Close ends a Conn whose reader waits for a Sub
// nobody reads, and what was delivered stays readable.
func TestCloseWhileBlocked(t *testing.T) {
	t.Parallel()
	ev := relaytest.NewKey("client-blocked").Note("x")
	frames := make([]string, 10)
	for i := range frames {
		frames[i] = `["EVENT","s",` + string(ev.Raw) + `]`
	}
	url := script(t, afterRequest(frames...))
	c := dial(t, url, client.Options{SubBuffer: 1})
	sub, err := c.Req("s", nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// The first event fills the buffer; the reader has read the second
	// and waits to deliver it.
	waitFor(t, "a blocked reader", func() bool {
		return len(sub.Messages()) == 1 && c.Stats().Received >= int64(2*len(frames[0]))
	})
	c.Close()
	if err := c.Err(); err != client.ErrClosed {
		t.Fatalf("Err: %v", err)
	}
	if m, ok := <-sub.Messages(); !ok || m.Type != nostr.LabelEvent {
		t.Fatalf("buffered: %+v %v", m, ok)
	}
	if _, ok := <-sub.Messages(); ok {
		t.Fatal("Sub channel not closed")
	}
	c.Close() // idempotent
}

// waitFor polls cond until it holds, failing the test if it does not
// within the test's guard timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	c := ctx(t)
	for !cond() {
		select {
		case <-c.Done():
			t.Fatalf("%s: not reached", what)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestPaused: a Paused Conn reads nothing until Resume; Close works
// without it.
func TestPaused(t *testing.T) {
	t.Parallel()
	sent := make(chan struct{})
	url := script(t, func(ws *websocket.Conn) {
		_ = ws.WriteMessage(websocket.TextMessage, []byte(`["NOTICE","early"]`))
		close(sent)
		_, _, _ = ws.ReadMessage()
	})
	c := dial(t, url, client.Options{Paused: true})
	<-sent
	if s := c.Stats(); s.Received != 0 || len(c.Inbox()) != 0 {
		t.Fatalf("paused Conn read: %+v", s)
	}
	c.Resume()
	if m, err := c.Next(ctx(t)); err != nil || m.Relay.Message != "early" {
		t.Fatalf("after Resume: %+v %v", m, err)
	}

	idle := dial(t, script(t, func(ws *websocket.Conn) { _, _, _ = ws.ReadMessage() }), client.Options{Paused: true})
	idle.Close()
	if err := idle.Err(); err != client.ErrClosed {
		t.Fatalf("closed while paused: %v", err)
	}
	if _, ok := <-idle.Inbox(); ok {
		t.Fatal("inbox of a closed paused Conn is open")
	}
}

// TestPublishCancelled: when Publish's context ends before the OK, the
// OK, when it comes, goes to the inbox.
func TestPublishCancelled(t *testing.T) {
	t.Parallel()
	ev := relaytest.NewKey("client-cancel").Note("x")
	got, release := make(chan struct{}), make(chan struct{})
	url := script(t, func(ws *websocket.Conn) {
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		close(got)
		<-release
		_ = ws.WriteMessage(websocket.TextMessage, []byte(`["OK","`+ev.ID.Hex()+`",true,""]`))
		_, _, _ = ws.ReadMessage()
	})
	c := dial(t, url, client.Options{})
	pctx, cancel := context.WithCancel(ctx(t))
	go func() { <-got; cancel() }()
	if _, err := c.Publish(pctx, ev); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish: %v", err)
	}
	close(release)
	if m, err := c.Next(ctx(t)); err != nil || m.Relay.Type != nostr.LabelOK || m.Relay.EventID != ev.ID {
		t.Fatalf("late OK: %+v %v", m, err)
	}
}

// TestSubscribe: an id is routed once at a time; after Unsubscribe it is
// free, and Next on the old Sub says it is unsubscribed.
func TestSubscribe(t *testing.T) {
	t.Parallel()
	c := dial(t, script(t, func(ws *websocket.Conn) { _, _, _ = ws.ReadMessage() }), client.Options{})
	s, err := c.Subscribe("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe("x"); !errors.Is(err, client.ErrSubscribed) {
		t.Fatalf("second Subscribe: %v", err)
	}
	if _, err := c.Req("x", nostr.Filter{}); !errors.Is(err, client.ErrSubscribed) {
		t.Fatalf("Req on a routed id: %v", err)
	}
	s.Unsubscribe()
	s.Unsubscribe()
	if _, err := s.Next(ctx(t)); !errors.Is(err, client.ErrUnsubscribed) {
		t.Fatalf("Next: %v", err)
	}
	if _, err := c.Subscribe("x"); err != nil {
		t.Fatal(err)
	}
}

// TestDialErrors: a URL that is not ws(s), a refused upgrade (with its
// status) and a refused connection are told apart.
func TestDialErrors(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://127.0.0.1:1", "ws://", "127.0.0.1:7447", "ws://[::1"} {
		if _, err := client.Dial(ctx(t), u, client.Options{}); !errors.Is(err, client.ErrURL) {
			t.Fatalf("%q: %v", u, err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	_, err := client.Dial(ctx(t), "ws"+strings.TrimPrefix(srv.URL, "http"), client.Options{})
	var he *client.HandshakeError
	if !errors.As(err, &he) || he.Status != http.StatusTooManyRequests {
		t.Fatalf("refused upgrade: %v", err)
	}
	addr := srv.Listener.Addr().String()
	srv.Close()
	_, err = client.Dial(ctx(t), "ws://"+addr, client.Options{})
	var de *client.DialError
	if !errors.As(err, &de) || errors.As(err, &he) || de.URL != "ws://"+addr || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("closed port: %v", err)
	}
}

// TestPrefix: the machine-readable prefix of OK and CLOSED messages.
func TestPrefix(t *testing.T) {
	t.Parallel()
	f := func(msg, want string) {
		t.Helper()
		if got := client.Prefix(msg); got != want {
			t.Fatalf("Prefix(%q) = %q, want %q", msg, got, want)
		}
	}
	f("blocked: you are banned", "blocked")
	f("auth-required: sign in", "auth-required")
	f("duplicate:no space", "duplicate")
	f("", "")
	f("no prefix here", "")
	f("two words: no", "")
	f(": empty", "")
}

// TestPingInterval: with PingInterval a relay that answers pings keeps
// the connection, one that goes silent (never reads, so never answers a
// ping) has it ended with an error that says so.
func TestPingInterval(t *testing.T) {
	t.Parallel()
	answering := script(t, func(ws *websocket.Conn) {
		for { // reading answers pings (gorilla's default ping handler)
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	})
	// Intervals long enough that a loaded machine answers within one.
	c := dial(t, answering, client.Options{PingInterval: 150 * time.Millisecond})
	time.Sleep(time.Second) // several intervals
	if err := c.Err(); err != nil {
		t.Fatalf("connection to a relay that answers pings ended: %v", err)
	}

	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	silent := script(t, func(ws *websocket.Conn) { <-hold })
	c = dial(t, silent, client.Options{PingInterval: 20 * time.Millisecond})
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection to a silent relay still open")
	}
	if err := c.Err(); !errors.Is(err, client.ErrClosed) || !strings.Contains(err.Error(), "not even a pong") {
		t.Fatalf("Err: %v", err)
	}
}
