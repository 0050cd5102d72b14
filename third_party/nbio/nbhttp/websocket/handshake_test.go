package websocket

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lesismal/nbio/nbhttp"
)

// TestHandshakeErrorSaysWhy (petrel patch 17): a refused handshake's body
// names what was wrong, not only the status, so that a client developer,
// or an operator whose proxy drops the Connection header, can tell.
func TestHandshakeErrorSaysWhy(t *testing.T) {
	u := NewUpgraderWithEngine(nbhttp.NewEngine(nbhttp.Config{}))
	u.CheckOrigin = func(*http.Request) bool { return true }
	for _, c := range []struct {
		name   string
		method string
		header map[string]string
		status int
		err    error
	}{
		{"no Connection: upgrade (a proxy dropped it)", "GET", map[string]string{"Upgrade": "websocket"}, 400, ErrUpgradeTokenNotFound},
		{"a POST", "POST", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, 405, ErrUpgradeMethodIsGet},
		{"version 8", "GET", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 400, ErrUpgradeInvalidWebsocketVersion},
		{"no key", "GET", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}, 400, ErrUpgradeMissingWebsocketKey},
	} {
		r := httptest.NewRequest(c.method, "/", nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		if _, err := u.Upgrade(w, r, nil); err != c.err {
			t.Fatalf("%s: %v, want %v", c.name, err, c.err)
		}
		body := strings.TrimSpace(w.Body.String())
		if want := http.StatusText(c.status) + ": " + c.err.Error(); w.Code != c.status || body != want {
			t.Fatalf("%s: %d %q, want %d %q", c.name, w.Code, body, c.status, want)
		}
	}
}
