package relaytest

import (
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Key is a signing identity for tests.
type Key struct {
	SK nostr.SecretKey
	PK nostr.PubKey
}

// NewKey derives a deterministic key from seed.
func NewKey(seed string) Key {
	sk := nostr.SecretKeyFromSeed([]byte(seed))
	return Key{SK: sk, PK: sk.PubKey()}
}

// Event builds and signs an event. createdAt 0 means now.
func (k Key) Event(kind int, content string, tags nostr.Tags, createdAt int64) *nostr.Event {
	if createdAt == 0 {
		createdAt = time.Now().Unix()
	}
	if tags == nil {
		tags = nostr.Tags{}
	}
	ev := &nostr.Event{Kind: kind, Content: content, Tags: tags, CreatedAt: createdAt}
	nostr.SignEvent(ev, k.SK)
	return ev
}

// Note builds a kind-1 note created now.
func (k Key) Note(content string, tags ...nostr.Tag) *nostr.Event {
	return k.Event(nostr.KindTextNote, content, nostr.Tags(tags), 0)
}
