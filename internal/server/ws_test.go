package server_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/lesismal/nbio/nbhttp/websocket"

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

// TestServerMakesNoDefaultEngine: the server's upgrader uses the server's
// own nbio engine, so serving (upgrades, messages, a close with a reason)
// makes no second engine (nbio's DefaultEngine, whose task pool nothing
// would use). In a child process: no other test may have made one first.
func TestServerMakesNoDefaultEngine(t *testing.T) {
	if os.Getenv("PETREL_TEST_DEFAULT_ENGINE_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestServerMakesNoDefaultEngine$", "-test.v")
		cmd.Env = append(os.Environ(), "PETREL_TEST_DEFAULT_ENGINE_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	r := relaytest.Start(t, relaytest.Options{})
	c := relaytest.Dial(t, r.URL)
	c.Req("s", `{"kinds":[1],"limit":1}`)
	c.Close()
	if websocket.DefaultEngine != nil {
		t.Fatal("serving made nbio's DefaultEngine")
	}
}
