package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// e2eAdmin is the NIP-86 admin of TestExactlyOnce's cluster.
var e2eAdmin = relaytest.NewKey("e2e admin")

// nip86AcrossNodes bans a pubkey through HAProxy (whichever node it
// picks) and publishes that pubkey's events to every node directly until
// each refuses them: every node reads the NIP-86 state again every 2 s
// (serve on PostgreSQL). The 30 s bound detects a node that never does;
// it is not a timing.
func nip86AcrossNodes(t *testing.T, c *testCluster) {
	spammer := relaytest.NewKey("e2e spammer " + newRun())
	base := "http://" + strings.TrimPrefix(c.proxy, "ws://")
	if code, out := relaytest.NIP86(t, base, e2eAdmin, "banpubkey", spammer.PK.Hex(), "spam"); code != 200 || out["result"] != true {
		t.Fatalf("banpubkey through HAProxy: %d %v", code, out)
	}
	banned := time.Now()
	deadline := banned.Add(30 * time.Second)
	for _, n := range c.nodes {
		conn := mustDial(t, n.url)
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			m, err := conn.Publish(ctx, spammer.Note(fmt.Sprintf("spam %d on %s", i, n.name)))
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", n.name, err)
			}
			if !m.OK && strings.HasPrefix(m.Message, "blocked:") {
				t.Logf("%s refuses the banned pubkey %v after the ban", n.name, time.Since(banned).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still answers %v %q to the banned pubkey 30s after the ban", n.name, m.OK, m.Message)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
