// Package nip98 makes NIP-98 HTTP authorization headers: a signed
// kind-27235 event naming the request's URL ("u"), method and the
// SHA-256 of its body ("payload"), base64-encoded after "Nostr ". petrel
// admin signs its NIP-86 requests with it; the relay's side of the check
// is internal/server's NIP-86 handler, which reads the header with Parse,
// checks the rest and refuses a token used before (Replays).
//
// Functions are safe for concurrent use.
package nip98

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Event returns the signed kind-27235 event authorizing one request:
// tags "u" (url), "method" (upper case) and, when body is not nil,
// "payload" (hex SHA-256 of body), created at now. It is signed with
// fresh auxiliary randomness (BIP-340 aux_rand), so two requests for the
// same call in the same second carry distinct tokens: a relay that
// refuses replayed tokens (Replays) accepts both.
func Event(sk nostr.SecretKey, method, url string, body []byte, now time.Time) *nostr.Event {
	ev := &nostr.Event{
		Kind:      nostr.KindHTTPAuth,
		CreatedAt: now.Unix(),
		Tags:      nostr.Tags{{"u", url}, {"method", strings.ToUpper(method)}},
	}
	if body != nil {
		sum := sha256.Sum256(body)
		ev.Tags = append(ev.Tags, nostr.Tag{"payload", hex.EncodeToString(sum[:])})
	}
	ev.PubKey = sk.PubKey()
	ev.ID = nostr.ComputeID(ev)
	var aux [32]byte
	rand.Read(aux[:])
	ev.Sig = sk.SignAux((*[32]byte)(&ev.ID), &aux)
	ev.Raw = nostr.Serialize(ev)
	return ev
}

// Header returns the Authorization header value for one request:
// "Nostr " and the base64 of Event's JSON.
func Header(sk nostr.SecretKey, method, url string, body []byte, now time.Time) string {
	return "Nostr " + base64.StdEncoding.EncodeToString(Event(sk, method, url, body, now).Raw)
}
