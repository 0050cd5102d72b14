package relaytest

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
)

// running maps the URL of each test relay still running to it, so that a
// client that times out waiting for a message can say what the relay was
// doing (a rare stall seen once in CI is otherwise a bare "timeout").
var running sync.Map // string -> *Relay

// diagnoseMax bounds the goroutine stacks a timeout prints.
const diagnoseMax = 24 << 10

// diagnose returns, for a read that timed out on a relay this package
// started, the relay's stats and the stacks of the goroutines in the
// relay and its store; "" for any other error or relay.
func (c *Client) diagnose(err error) string {
	if !IsTimeout(err) {
		return ""
	}
	v, ok := running.Load(c.url)
	if !ok {
		return ""
	}
	r := v.(*Relay)
	var b strings.Builder
	b.WriteString("\nrelay stats: ")
	if js, err := json.Marshal(r.Stats()); err == nil {
		b.Write(js)
	}
	b.WriteString("\nrelay goroutines (those in petrel's relay and store packages):\n")
	b.WriteString(relayStacks(diagnoseMax))
	return b.String()
}

// relayStacks returns the stacks of every goroutine with a frame in
// petrel's relay or store packages (not the test's own), up to max
// bytes.
func relayStacks(max int) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out bytes.Buffer
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("petrel/internal/relay.")) && !bytes.Contains(g, []byte("petrel/internal/store/")) {
			continue
		}
		if bytes.Contains(g, []byte("relaytest.")) {
			continue // the test goroutine and this client's pump
		}
		if out.Len()+len(g) > max {
			out.WriteString("(more goroutines left out)\n")
			break
		}
		out.Write(g)
		out.WriteString("\n\n")
	}
	return out.String()
}
