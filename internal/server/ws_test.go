package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestWebSocketOutlivesHeaderTimeout: HeaderTimeout bounds the wait for
// a request head only; the upgrade clears it (nbio arms it before it
// reads the connection, so the upgrade always comes after), and idle
// WebSockets are the sweeper's.
func TestWebSocketOutlivesHeaderTimeout(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{Server: server.Config{HeaderTimeout: 400 * time.Millisecond}})
	clients := make([]*relaytest.Client, 20)
	for i := range clients {
		clients[i] = relaytest.Dial(t, r.URL)
	}
	time.Sleep(1200 * time.Millisecond) // three header timeouts
	for i, c := range clients {
		c.Req(fmt.Sprintf("s%d", i), `{"kinds":[1],"limit":1}`)
	}
}
