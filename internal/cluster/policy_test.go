package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestPolicyHint: a ban made through one node's NIP-86 API reaches the
// other node through the bus's hint, not through its periodic reading
// of the shared state (an hour here): the next event of the banned
// pubkey is refused there. The node the change was made through ignores
// its own hint, heard back.
func TestPolicyHint(t *testing.T) {
	t.Parallel()
	url, subject, st := sharedNATS(t), testSubject(t), sharedStore(t)
	admin, alice := relaytest.NewKey("cluster admin"), relaytest.NewKey("cluster alice")
	ro := relaytest.Options{
		Persister: &policy.MemPersister{}, PolicyRefresh: time.Hour,
		Server: server.Config{Admins: []string{admin.PK.Hex()}},
	}
	a := startNodeWith(t, url, "a", subject, st, ro, nil)
	b := startNodeWith(t, url, "b", subject, st, ro, nil)
	waitConnected(t, a, b)
	cb := relaytest.Dial(t, b.r.URL)
	cb.MustPublish(alice.Note("before the ban"))

	if code, out := relaytest.NIP86(t, a.r.HTTPURL(), admin, "banpubkey", alice.PK.Hex(), "spam"); code != 200 || out["result"] != true {
		t.Fatalf("banpubkey through a: %d %v", code, out)
	}
	waitFor(t, "the ban on b", func() bool {
		m := cb.Publish(alice.Note("after the ban"))
		return !m.OK && strings.HasPrefix(m.Message, "blocked:")
	})
	sa, sb := a.b.Stats(), b.b.Stats()
	if sa.PolicyHintsSent != 1 || sb.PolicyHintsReceived != 1 || sa.PolicyHintsReceived != 0 || sb.PolicyHintsSent != 0 {
		t.Fatalf("hints: a sent %d and received %d, b sent %d and received %d; want 1, 0, 0, 1",
			sa.PolicyHintsSent, sa.PolicyHintsReceived, sb.PolicyHintsSent, sb.PolicyHintsReceived)
	}
}
