package nip59

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/petrel-relay/petrel/internal/nip44"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// Kinds of NIP-59 and NIP-17.
const (
	KindSeal     = nostr.KindSeal        // 13
	KindDM       = nostr.KindChatMessage // 14
	KindGiftWrap = nostr.KindGiftWrap    // 1059
)

// MaxSkew is how far into the past seals and wraps are dated.
const MaxSkew = 2 * 24 * time.Hour

// Sentinel errors.
var (
	// ErrRumor means JSON that is not an unsigned event, or a rumor
	// whose fields do not hold together (id, author).
	ErrRumor = errors.New("nip59: not a valid rumor")
	// ErrSeal means the inner layer is not a valid kind-13 seal.
	ErrSeal = errors.New("nip59: not a valid seal")
	// ErrWrap means an event that is not a kind-1059 gift wrap.
	ErrWrap = errors.New("nip59: not a gift wrap")
	// ErrImpersonation means a rumor whose author is not the seal's
	// signer.
	ErrImpersonation = errors.New("nip59: the rumor's author did not sign the seal")
)

// Rumor is an unsigned event.
type Rumor struct {
	ID        nostr.ID
	PubKey    nostr.PubKey
	CreatedAt int64
	Kind      int
	Tags      nostr.Tags
	Content   string
}

// event returns the rumor as an Event without signature (for ids).
func (r *Rumor) event() *nostr.Event {
	return &nostr.Event{PubKey: r.PubKey, CreatedAt: r.CreatedAt, Kind: r.Kind, Tags: r.Tags, Content: r.Content}
}

// SetID sets r.ID to the NIP-01 id of r's fields.
func (r *Rumor) SetID() { r.ID = nostr.ComputeID(r.event()) }

// JSON returns the rumor as an event object without "sig", strings
// escaped as in NIP-01's canonical form.
func (r *Rumor) JSON() []byte {
	b := []byte(`{"id":"` + r.ID.Hex() + `","pubkey":"` + r.PubKey.Hex() + `","created_at":`)
	b = strconv.AppendInt(b, r.CreatedAt, 10)
	b = append(b, `,"kind":`...)
	b = strconv.AppendInt(b, int64(r.Kind), 10)
	b = append(b, `,"tags":[`...)
	for i, t := range r.Tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, s := range t {
			if j > 0 {
				b = append(b, ',')
			}
			b = nostr.AppendString(b, s)
		}
		b = append(b, ']')
	}
	b = append(b, `],"content":`...)
	b = nostr.AppendString(b, r.Content)
	return append(b, '}')
}

// rumorJSON is the wire shape of a rumor; every field is optional in
// input (ParseRumor fills what is missing).
type rumorJSON struct {
	ID        *string         `json:"id"`
	PubKey    *string         `json:"pubkey"`
	CreatedAt *int64          `json:"created_at"`
	Kind      *int            `json:"kind"`
	Tags      nostr.Tags      `json:"tags"`
	Content   *string         `json:"content"`
	Sig       json.RawMessage `json:"sig"`
}

// ParseRumor reads an event object that has no signature. Missing fields
// are filled: pubkey with author, created_at with now, tags with none,
// content with "", kind is required. A given pubkey must be author; a
// given id must be the id of the fields (it is computed when absent). A
// "sig" is refused: a rumor that is signed is no longer deniable.
func ParseRumor(data []byte, author nostr.PubKey, now time.Time) (*Rumor, error) {
	var j rumorJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRumor, nostr.JSONTypeError(err))
	}
	if j.Sig != nil {
		return nil, fmt.Errorf("%w: it has a \"sig\" (a rumor is unsigned)", ErrRumor)
	}
	if j.Kind == nil || *j.Kind < 0 || *j.Kind > nostr.MaxKind {
		return nil, fmt.Errorf("%w: \"kind\" missing or outside 0-%d", ErrRumor, nostr.MaxKind)
	}
	r := &Rumor{PubKey: author, CreatedAt: now.Unix(), Kind: *j.Kind, Tags: j.Tags}
	if j.PubKey != nil {
		pk, err := nostr.ParsePubKey(*j.PubKey)
		if err != nil {
			return nil, fmt.Errorf("%w: pubkey: %v", ErrRumor, err)
		}
		if pk != author {
			return nil, fmt.Errorf("%w: pubkey %s is not the sender's %s", ErrImpersonation, pk.Hex(), author.Hex())
		}
	}
	if j.CreatedAt != nil {
		if *j.CreatedAt < 0 || *j.CreatedAt > nostr.MaxTimestamp {
			return nil, fmt.Errorf("%w: created_at out of range", ErrRumor)
		}
		r.CreatedAt = *j.CreatedAt
	}
	if j.Content != nil {
		r.Content = *j.Content
	}
	if r.Tags == nil {
		r.Tags = nostr.Tags{}
	}
	r.SetID()
	if j.ID != nil && *j.ID != r.ID.Hex() {
		return nil, fmt.Errorf("%w: id %s is not the hash of its fields (%s)", ErrRumor, *j.ID, r.ID.Hex())
	}
	return r, nil
}

// NewDM returns the NIP-17 chat message (kind 14) rumor from author to
// recipients, with one "p" tag each, created now.
func NewDM(author nostr.PubKey, recipients []nostr.PubKey, content string, now time.Time) *Rumor {
	r := &Rumor{PubKey: author, CreatedAt: now.Unix(), Kind: KindDM, Content: content, Tags: nostr.Tags{}}
	for _, p := range recipients {
		r.Tags = append(r.Tags, nostr.Tag{"p", p.Hex()})
	}
	r.SetID()
	return r
}

// pastTime returns now minus a random duration below MaxSkew.
func pastTime(now time.Time) int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	skew := binary.LittleEndian.Uint64(b[:]) % uint64(MaxSkew/time.Second)
	return now.Unix() - int64(skew)
}

// Seal returns the kind-13 seal of r for recipient, signed by sender,
// whose public key must be r's author.
func Seal(r *Rumor, sender nostr.SecretKey, recipient nostr.PubKey, now time.Time) (*nostr.Event, error) {
	if sender.PubKey() != r.PubKey {
		return nil, fmt.Errorf("%w: the rumor's pubkey is not the sender's", ErrImpersonation)
	}
	ck, err := nip44.NewConversationKey(sender, recipient)
	if err != nil {
		return nil, err
	}
	content, err := nip44.Encrypt(ck, string(r.JSON()))
	if err != nil {
		return nil, err
	}
	seal := &nostr.Event{CreatedAt: pastTime(now), Kind: KindSeal, Tags: nostr.Tags{}, Content: content}
	nostr.SignEvent(seal, sender)
	return seal, nil
}

// Wrap returns the kind-1059 gift wrap of seal for recipient, signed by
// a fresh one-time key that is then forgotten.
func Wrap(seal *nostr.Event, recipient nostr.PubKey, now time.Time) (*nostr.Event, error) {
	one := nostr.GenerateKey()
	ck, err := nip44.NewConversationKey(one, recipient)
	if err != nil {
		return nil, err
	}
	content, err := nip44.Encrypt(ck, string(nostr.Serialize(seal)))
	if err != nil {
		return nil, err
	}
	w := &nostr.Event{CreatedAt: pastTime(now), Kind: KindGiftWrap,
		Tags: nostr.Tags{{"p", recipient.Hex()}}, Content: content}
	nostr.SignEvent(w, one)
	return w, nil
}

// GiftWrap seals r with sender's key and wraps the seal for recipient.
func GiftWrap(r *Rumor, sender nostr.SecretKey, recipient nostr.PubKey, now time.Time) (*nostr.Event, error) {
	seal, err := Seal(r, sender, recipient, now)
	if err != nil {
		return nil, err
	}
	return Wrap(seal, recipient, now)
}

// Unwrap opens the gift wrap w with the recipient's key and returns the
// rumor and the seal, after checking every layer (see the package
// comment). v verifies the seal's signature.
func Unwrap(w *nostr.Event, recipient nostr.SecretKey, v nostr.Verifier) (*Rumor, *nostr.Event, error) {
	if w.Kind != KindGiftWrap {
		return nil, nil, fmt.Errorf("%w: kind %d", ErrWrap, w.Kind)
	}
	ck, err := nip44.NewConversationKey(recipient, w.PubKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrWrap, err)
	}
	sealJSON, err := nip44.Decrypt(ck, w.Content)
	if err != nil {
		return nil, nil, fmt.Errorf("open the wrap (is it for this key?): %w", err)
	}
	seal, err := nostr.ParseEvent([]byte(sealJSON), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrSeal, err)
	}
	if seal.Kind != KindSeal {
		return nil, nil, fmt.Errorf("%w: kind %d", ErrSeal, seal.Kind)
	}
	if !nostr.CheckID(seal) || !nostr.VerifyEvent(v, seal) {
		return nil, nil, fmt.Errorf("%w: bad id or signature", ErrSeal)
	}
	ck, err = nip44.NewConversationKey(recipient, seal.PubKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSeal, err)
	}
	rumorJSON, err := nip44.Decrypt(ck, seal.Content)
	if err != nil {
		return nil, nil, fmt.Errorf("open the seal: %w", err)
	}
	var j struct {
		PubKey string `json:"pubkey"`
	}
	if err := json.Unmarshal([]byte(rumorJSON), &j); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrRumor, err)
	}
	author, err := nostr.ParsePubKey(j.PubKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: pubkey: %v", ErrRumor, err)
	}
	if author != seal.PubKey {
		return nil, nil, fmt.Errorf("%w: rumor by %s, seal by %s", ErrImpersonation, author.Hex(), seal.PubKey.Hex())
	}
	r, err := ParseRumor([]byte(rumorJSON), author, time.Unix(0, 0))
	if err != nil {
		return nil, nil, err
	}
	return r, seal, nil
}
