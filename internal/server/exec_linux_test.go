package server_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestChildHoldsNoConnection: a process the relay's process starts while
// a WebSocket is open (a write-policy plugin, restarted at any time)
// inherits none of the edge's descriptors, so the relay's close of the
// connection reaches the client while that process runs. nbio's copy of
// each accepted socket was not close-on-exec: the child kept the
// connection open, and kept it in the relay's epoll set.
func TestChildHoldsNoConnection(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	ws := dialRaw(t, r.Server.Addr().String())

	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()
	dir := "/proc/" + strconv.Itoa(child.Process.Pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		link, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		if strings.HasPrefix(link, "socket:") || strings.HasPrefix(link, "anon_inode:") {
			t.Errorf("the child holds descriptor %s: %s", e.Name(), link)
		}
	}

	// The client closes; the relay answers and closes the connection,
	// which must reach the client while the child runs.
	ws.send(rawFrame(0x88, true, []byte{0x03, 0xe8}))
	ws.expectClose(1000)
}
