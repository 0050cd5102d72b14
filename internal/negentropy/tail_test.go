package negentropy

import (
	"fmt"
	"testing"
)

// tailCase builds sets where a session cut by frame size limits trips the
// reference implementations' closing fingerprint. The client has 16
// buckets of 600 items: 13 in a low timestamp region, shared with the
// server except that the server has one extra item at the top of each
// bucket, and 3 client-only buckets in a high region. With these limits:
//   - the server's first reply is cut just after answering the first
//     high bucket (an empty id list), and closes with a fingerprint of
//     nothing, truthfully, for the rest of the high region;
//   - the client's answer covers the whole low region and is cut exactly
//     at that closing range, whose split it drops. The reference then
//     fingerprints its items from that range's upper bound (infinity):
//     nothing. But the closing range starts at the end of the low region
//     and holds the client's high items it has not yet reported;
//   - the server has nothing there either, so the empty fingerprints
//     match, it skips, and the session ends without reporting them.
func tailCase() (client, server []Item, climit, slimit int) {
	for b := range uint64(13) {
		both := genItems(fmt.Sprintf("tail-low-%d", b), 600, b*100000, 99000)
		client = append(client, both...)
		server = append(server, both...)
		server = append(server, genItems(fmt.Sprintf("tail-extra-%d", b), 1, b*100000+99500, 0)...)
	}
	client = append(client, genItems("tail-high", 1800, 10000000, 100000)...)
	return client, server, tailClientLimit, tailServerLimit
}

// The limits that make tailCase trip the reference behaviour, found by
// scanning for the first pair where the cuts fall as described above.
const tailClientLimit, tailServerLimit = 4401, 4369

func TestTailFingerprintRegression(t *testing.T) {
	client, server, climit, slimit := tailCase()

	c, s := ours(t, client, server, climit, slimit)
	out := run(t, c, s, climit, slimit)
	checkDiff(t, client, server, out.have, out.need, true)

	// The same session with the reference's closing fingerprint on both
	// sides ends early, two thirds of the client-only ids unreported (as
	// go-nostr does: see testdata/gonostr-tail-loss.txt). This checks that
	// the case still trips the behaviour it guards against.
	c, s = ours(t, client, server, climit, slimit)
	c.referenceTail, s.referenceTail = true, true
	ref := run(t, c, s, climit, slimit)
	if n := countMissing(client, server, ref.have, ref.need); n != 1200 {
		t.Errorf("reference behaviour missed %d ids, want 1200", n)
	}
}
