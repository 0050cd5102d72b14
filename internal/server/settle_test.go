package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestSettleClearsLateDeadline: when nbio arms the HTTP header deadline
// after the upgrade (simulated here on every connection), the settler
// clears it and WebSockets outlive the header timeout.
func TestSettleClearsLateDeadline(t *testing.T) {
	server.SetSimulateLateDeadline(true)
	defer server.SetSimulateLateDeadline(false)
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
