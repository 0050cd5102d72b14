package server_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// httpConn is a keep-alive HTTP connection to the relay, made by hand so
// the test decides how long it stays open.
type httpConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dialHTTP(t testing.TB, addr string) *httpConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &httpConn{t: t, c: c, r: bufio.NewReader(c)}
}

// get sends a GET for path with the given extra header lines and returns
// the response and its body, or the error reading it.
func (h *httpConn) get(path string, header ...string) (*http.Response, string, error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: relay\r\n"
	for _, l := range header {
		req += l + "\r\n"
	}
	if _, err := io.WriteString(h.c, req+"\r\n"); err != nil {
		return nil, "", err
	}
	_ = h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(h.r, nil)
	if err != nil {
		return nil, "", err
	}
	body, err := io.ReadAll(res.Body)
	return res, string(body), err
}

// mustGet is get for a request that must be answered 200.
func (h *httpConn) mustGet(path string, header ...string) (*http.Response, string) {
	h.t.Helper()
	res, body, err := h.get(path, header...)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	if res.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %s %q", path, res.Status, body)
	}
	return res, body
}

// upgrade asks to become a WebSocket and returns the status answered.
func (h *httpConn) upgrade() int {
	h.t.Helper()
	res, _, err := h.get("/", "Upgrade: websocket", "Connection: Upgrade",
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13")
	if err != nil {
		h.t.Fatalf("upgrade: %v", err)
	}
	return res.StatusCode
}

// waitSlots waits until the relay counts total slots, reserved of them in
// the HTTP reserve (a closed connection releases its slot in nbio's
// OnClose, after the client's close).
func waitSlots(t testing.TB, r *relaytest.Relay, total, reserved int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		st := r.Server.StatsDoc()
		if st.SlotsActive == total && st.SlotsReserve == reserved {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots: %d active, %d in the HTTP reserve; want %d, %d", st.SlotsActive, st.SlotsReserve, total, reserved)
		}
	}
}

// TestMonitoringAtConnectionCap: with max_connections WebSockets open,
// /stats, /metrics and NIP-11 are answered on connections of the HTTP
// reserve; one more WebSocket is refused (503); the reserve is bounded:
// at its size connections are served, past it they are closed at accept.
// A reserved connection may become a WebSocket once a slot has freed.
func TestMonitoringAtConnectionCap(t *testing.T) {
	const maxConns, reserve = 3, 2
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{MaxConnections: maxConns, HTTPReserve: reserve}})
	addr := r.Server.Addr().String()
	var wss []*relaytest.Client
	for i := 0; i < maxConns; i++ {
		wss = append(wss, relaytest.Dial(t, r.URL))
	}
	waitSlots(t, r, maxConns, 0)

	// One more WebSocket: admitted to the reserve at accept, refused at
	// its upgrade.
	_, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{})
	var he *relaytest.HandshakeError
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable {
		t.Fatalf("WebSocket past max_connections: %v; want HTTP 503", err)
	}
	if st := r.Stats(); st.ConnectionsRejected != 1 || st.LimitTrips["max_connections"] != 1 {
		t.Fatalf("after the refused WebSocket: connections_rejected %d, limits_tripped[max_connections] %d; want 1, 1",
			st.ConnectionsRejected, st.LimitTrips["max_connections"])
	}
	waitSlots(t, r, maxConns, 0)

	// The reserve, filled: both connections are served.
	h1 := dialHTTP(t, addr)
	_, body := h1.mustGet("/stats")
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/stats: %v", err)
	}
	if st["connection_slots_active"] != float64(maxConns+1) || st["connection_slots_http_reserve"] != float64(1) {
		t.Fatalf("/stats at the cap: connection_slots_active %v, connection_slots_http_reserve %v; want %d, 1",
			st["connection_slots_active"], st["connection_slots_http_reserve"], maxConns+1)
	}
	h2 := dialHTTP(t, addr)
	if _, body := h2.mustGet("/metrics"); !strings.Contains(body, "petrel_connection_slots_http_reserve 2\n") {
		t.Fatalf("/metrics with the reserve full lacks petrel_connection_slots_http_reserve 2")
	}
	res, body := h1.mustGet("/", "Accept: application/nostr+json") // keep-alive: the same connection
	if ct := res.Header.Get("Content-Type"); ct != "application/nostr+json" || !strings.Contains(body, `"supported_nips"`) {
		t.Fatalf("NIP-11 at the cap: %s %q", ct, body)
	}
	waitSlots(t, r, maxConns+reserve, reserve)

	// Past the reserve: closed at accept, unanswered.
	h3 := dialHTTP(t, addr)
	if res, _, err := h3.get("/stats"); err == nil || (!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("a connection past the reserve: %v, %v; want it closed unanswered", res, err)
	}
	if v := r.Stats().ConnectionsRejected; v != 2 {
		t.Fatalf("connections_rejected %d; want 2", v)
	}

	// A reserved connection leaves: the next one is served.
	h1.c.Close()
	waitSlots(t, r, maxConns+1, 1)
	h4 := dialHTTP(t, addr)
	h4.mustGet("/", "Accept: application/nostr+json")
	waitSlots(t, r, maxConns+reserve, reserve)

	// A WebSocket leaves: a reserved connection may now upgrade (and
	// leaves the reserve); the other still may not.
	wss[0].Close()
	waitSlots(t, r, maxConns+1, reserve)
	if code := h2.upgrade(); code != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade from the reserve with a slot free: %d; want 101", code)
	}
	waitSlots(t, r, maxConns+1, 1)
	if code := h4.upgrade(); code != http.StatusServiceUnavailable {
		t.Fatalf("upgrade from the reserve at the cap: %d; want 503", code)
	}
	for _, c := range wss[1:] {
		c.Req("s", `{"limit":1}`) // the WebSockets at the cap were served throughout
	}
}
