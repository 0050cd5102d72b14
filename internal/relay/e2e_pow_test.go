package relay_test

// NIP-13 minimum proof of work.

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// mine returns k's kind-1 note whose id has at least bits leading zero
// bits, with a nonce tag committing to target (no third element if
// target < 0).
func mine(t testing.TB, k relaytest.Key, bits, target int) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{PubKey: k.PK, Kind: 1, Content: "mined", CreatedAt: time.Now().Unix()}
	for nonce := 0; nonce < 1<<24; nonce++ {
		tag := nostr.Tag{"nonce", strconv.Itoa(nonce)}
		if target >= 0 {
			tag = append(tag, strconv.Itoa(target))
		}
		ev.Tags = nostr.Tags{tag}
		id := nostr.ComputeID(ev)
		if leadingZeros(id) >= bits {
			nostr.SignEvent(ev, k.SK)
			return ev
		}
	}
	t.Fatal("mine: no luck")
	return nil
}

// leadingZeros counts leading zero bits, bit by bit (independent of the
// relay's code).
func leadingZeros(id nostr.ID) int {
	n := 0
	for _, b := range id {
		for i := 7; i >= 0; i-- {
			if b&(1<<i) != 0 {
				return n
			}
			n++
		}
	}
	return n
}

func TestPoW(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{Policy: policy.Config{MinPoWDifficulty: 10}})
	alice := relaytest.NewKey("alice")
	c := relaytest.Dial(t, r.URL)
	c.MustPublish(mine(t, alice, 10, 10))
	c.MustPublish(mine(t, alice, 10, -1)) // no committed target: accepted
	// Not enough work. The note is unlikely to have 10 zero bits; make
	// sure, then check the message names both figures.
	note := alice.Note("lazy")
	for leadingZeros(note.ID) >= 10 {
		note = alice.Note(note.Content + ".")
	}
	want := "pow: difficulty " + strconv.Itoa(leadingZeros(note.ID)) + " is less than 10"
	if m := c.Publish(note); m.OK || m.Message != want {
		t.Fatalf("unmined: %+v, want %q", m, want)
	}
	// Enough zero bits, but a lower committed target.
	low := mine(t, alice, 10, 8)
	if m := c.Publish(low); m.OK || m.Message != "pow: committed target difficulty 8 is less than 10" {
		t.Fatalf("low target: %+v", m)
	}
	if v := r.Stats().EventsRejected["pow"]; v != 2 {
		t.Fatalf("rejected pow = %d", v)
	}
	_, body := getHTTP(t, r, "GET", "/", map[string]string{"Accept": "application/nostr+json"})
	var doc struct {
		SupportedNIPs []int          `json:"supported_nips"`
		Limitation    map[string]any `json:"limitation"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Limitation["min_pow_difficulty"] != float64(10) || doc.Limitation["restricted_writes"] != true || !containsInt(doc.SupportedNIPs, 13) {
		t.Fatalf("NIP-11: %s", body)
	}
}

func TestPoWOff(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	c := relaytest.Dial(t, r.URL)
	c.MustPublish(relaytest.NewKey("alice").Note("no work"))
	doc := nip11Doc(t, r)
	if containsAny(doc["supported_nips"].([]any), 13) || doc["limitation"].(map[string]any)["min_pow_difficulty"] != float64(0) {
		t.Fatalf("NIP-11 without PoW: %v", doc)
	}
}
