package nip19

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/bech32"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// The examples of NIP-19 itself.
const (
	specNpub     = "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
	specNpubHex  = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e"
	specNsec     = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
	specNsecHex  = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
	specNprofile = "nprofile1qqsrhuxx8l9ex335q7he0f09aej04zpazpl0ne2cgukyawd24mayt8gpp4mhxue69uhhytnc9e3k7mgpz4mhxue69uhkg6nzv9ejuumpv34kytnrdaksjlyr9p"
	specProfPK   = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
)

func mustPK(t *testing.T, s string) nostr.PubKey {
	t.Helper()
	pk, err := nostr.ParsePubKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

func TestSpecExamples(t *testing.T) {
	if got := EncodePubKey(mustPK(t, specNpubHex)); got != specNpub {
		t.Errorf("npub: got %s", got)
	}
	sk, err := nostr.ParseSecretKey(specNsecHex)
	if err != nil {
		t.Fatal(err)
	}
	if got := EncodeSecretKey(sk); got != specNsec {
		t.Errorf("nsec: got %s", got)
	}
	p := Profile{PubKey: mustPK(t, specProfPK), Relays: []string{"wss://r.x.com", "wss://djbas.sadkb.com"}}
	got, err := EncodeProfile(p)
	if err != nil || got != specNprofile {
		t.Errorf("nprofile: got %s, %v", got, err)
	}
	e, err := Decode(specNprofile)
	if err != nil || !reflect.DeepEqual(*e.Profile, p) {
		t.Errorf("decode nprofile: %+v, %v", e.Profile, err)
	}
	e, err = Decode(specNsec)
	if err != nil || e.SecretKey != sk {
		t.Errorf("decode nsec: %v", err)
	}
}

func TestRoundTrips(t *testing.T) {
	pk := mustPK(t, specNpubHex)
	var id nostr.ID
	copy(id[:], pk[:])
	id[0] ^= 0xff
	f := func(name string, s string, want Entity) {
		t.Helper()
		got, err := Decode(s)
		if err != nil {
			t.Errorf("%s: decode %s: %v", name, s, err)
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
		// Upper case is bech32 too.
		if up, err := Decode(strings.ToUpper(s)); err != nil || !reflect.DeepEqual(up, want) {
			t.Errorf("%s: upper case: %v", name, err)
		}
	}
	must := func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f("npub", EncodePubKey(pk), Entity{Prefix: "npub", PubKey: pk})
	f("note", EncodeNote(id), Entity{Prefix: "note", ID: id})
	f("nprofile no relays", must(EncodeProfile(Profile{PubKey: pk})), Entity{Prefix: "nprofile", Profile: &Profile{PubKey: pk}})
	ev := EventPointer{ID: id, Relays: []string{"wss://a.example", "wss://b.example/x"}, Author: pk, HasAuthor: true, Kind: 30023, HasKind: true}
	f("nevent full", must(EncodeEvent(ev)), Entity{Prefix: "nevent", Event: &ev})
	bare := EventPointer{ID: id}
	f("nevent bare", must(EncodeEvent(bare)), Entity{Prefix: "nevent", Event: &bare})
	big := EventPointer{ID: id, Kind: 1<<32 - 1, HasKind: true}
	f("nevent kind 2^32-1", must(EncodeEvent(big)), Entity{Prefix: "nevent", Event: &big})
	a := Address{Identifier: "my-article", PubKey: pk, Kind: 30023, Relays: []string{"wss://relay.example"}}
	f("naddr", must(EncodeAddress(a)), Entity{Prefix: "naddr", Address: &a})
	empty := Address{PubKey: pk, Kind: 10002}
	f("naddr empty identifier", must(EncodeAddress(empty)), Entity{Prefix: "naddr", Address: &empty})
	long := Address{Identifier: strings.Repeat("d", MaxTLVValue), PubKey: pk, Kind: 30000,
		Relays: []string{"wss://" + strings.Repeat("r", MaxTLVValue-6)}}
	f("naddr at the TLV limit", must(EncodeAddress(long)), Entity{Prefix: "naddr", Address: &long})
}

func TestEncodeTooLong(t *testing.T) {
	pk := mustPK(t, specNpubHex)
	f := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrTooLong) {
			t.Errorf("%s: got %v, want ErrTooLong", name, err)
		}
	}
	_, err := EncodeAddress(Address{Identifier: strings.Repeat("d", MaxTLVValue+1), PubKey: pk})
	f("identifier", err)
	_, err = EncodeProfile(Profile{PubKey: pk, Relays: []string{strings.Repeat("r", MaxTLVValue+1)}})
	f("profile relay", err)
	_, err = EncodeEvent(EventPointer{Relays: []string{strings.Repeat("r", MaxTLVValue+1)}})
	f("event relay", err)
	_, err = EncodeAddress(Address{PubKey: pk, Relays: []string{strings.Repeat("r", MaxTLVValue+1)}})
	f("address relay", err)
}

// raw bech32-encodes bytes under any prefix, for payloads Encode* would
// not make.
func raw(t *testing.T, prefix string, data []byte) string {
	t.Helper()
	five, err := bech32.ConvertBits(data, 8, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bech32.Encode(prefix, five)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecodeRejects(t *testing.T) {
	pk := mustPK(t, specNpubHex)
	kind := []byte{3, 4, 0, 0, 0x75, 0x23}
	author := append([]byte{2, 32}, pk[:]...)
	special := append([]byte{0, 32}, pk[:]...)
	f := func(name, s string, want error) {
		t.Helper()
		_, err := Decode(s)
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	flip := []byte(specNpub)
	flip[10] = 'q'
	f("bad checksum", string(flip), ErrBech32)
	f("mixed case", "Npub"+specNpub[4:], ErrBech32)
	f("no separator", "npubqqqqqqqqqqqqq", ErrBech32)
	f("not bech32 at all", "hello", ErrBech32)
	f("empty", "", ErrBech32)
	five, _ := bech32.ConvertBits(pk[:], 8, 5, true)
	m, err := bech32.EncodeM("npub", five)
	if err != nil {
		t.Fatal(err)
	}
	f("bech32m", m, ErrBech32)
	f("unknown prefix", raw(t, "nrelay", []byte("wss://x")), ErrPrefix)
	f("npub of 31 bytes", raw(t, "npub", pk[:31]), ErrPayload)
	f("npub of 33 bytes", raw(t, "npub", append(pk[:], 0)), ErrPayload)
	f("note of 0 bytes", raw(t, "note", nil), ErrPayload)
	f("nprofile without key", raw(t, "nprofile", []byte{1, 3, 'w', 's', ':'}), ErrPayload)
	f("nprofile key of 31 bytes", raw(t, "nprofile", append([]byte{0, 31}, pk[:31]...)), ErrPayload)
	f("nprofile truncated record", raw(t, "nprofile", append([]byte{0, 33}, pk[:]...)), ErrPayload)
	f("nprofile lone type byte", raw(t, "nprofile", append(append([]byte{}, special...), 1)), ErrPayload)
	f("nprofile key twice", raw(t, "nprofile", append(append([]byte{}, special...), special...)), ErrPayload)
	f("nprofile relay not UTF-8", raw(t, "nprofile", append(append([]byte{}, special...), 1, 2, 0xff, 0xfe)), ErrPayload)
	f("nevent without id", raw(t, "nevent", author), ErrPayload)
	f("nevent kind of 2 bytes", raw(t, "nevent", append(append([]byte{}, special...), 3, 2, 0, 1)), ErrPayload)
	f("nevent author twice", raw(t, "nevent", append(append(append([]byte{}, special...), author...), author...)), ErrPayload)
	f("naddr without kind", raw(t, "naddr", append([]byte{0, 1, 'd'}, author...)), ErrPayload)
	f("naddr without author", raw(t, "naddr", append([]byte{0, 1, 'd'}, kind...)), ErrPayload)
	f("naddr without identifier", raw(t, "naddr", append(append([]byte{}, author...), kind...)), ErrPayload)
	f("naddr identifier not UTF-8", raw(t, "naddr", append(append([]byte{0, 1, 0xff}, author...), kind...)), ErrPayload)
}

// TestDecodeReasons: what the bech32 decoder found wrong is said in
// words, not as its separator index or checksums in hex.
func TestDecodeReasons(t *testing.T) {
	flip := []byte(specNpub)
	flip[10] = 'q'
	for s, want := range map[string]string{
		string(flip):          "the checksum does not match: a character is mistyped, missing or extra",
		"Npub" + specNpub[4:]: "upper and lower case mixed",
		"npubqqqqqqqqqqqqq":   `no "1" between a prefix and the data`,
		"1qqqqqqqqqqqqqq":     `no prefix before the "1"`,
		"nsec1acdef":          `5 characters after the last "1", too few to be one`,
		"hello":               "5 characters, too short to be one",
		"1":                   "1 character, too short to be one",
		"nsec1acdefqq1q":      `1 character after the last "1", too few to be one`,
		"npub1qqqqqqbqqqqqq":  `'b' is not a bech32 character (every letter and digit but 1, b, i and o)`,
		"npub1qqqq qqqqqqq":   `' ' is not a bech32 character`,
	} {
		_, err := Decode(s)
		if err == nil || err.Error() != "nip19: not a valid bech32 string: "+want {
			t.Errorf("%q: got %v\nwant nip19: not a valid bech32 string: %s", s, err, want)
		}
	}
}

func TestDecodeSkipsUnknownRecords(t *testing.T) {
	pk := mustPK(t, specNpubHex)
	data := append([]byte{9, 3, 'x', 'y', 'z', 0, 32}, pk[:]...)
	data = append(data, 200, 0)
	e, err := Decode(raw(t, "nprofile", data))
	if err != nil || e.Profile.PubKey != pk || len(e.Profile.Relays) != 0 {
		t.Fatalf("got %+v, %v", e.Profile, err)
	}
}

func TestDecodeMaxLength(t *testing.T) {
	pk := mustPK(t, specNpubHex)
	// An naddr whose payload is n bytes is 12 + ceil(8n/5) characters:
	// 2552 bytes make exactly MaxLength (4096), 2553 bytes 4097. The
	// padding is unknown TLV records, which decoding skips.
	build := func(n int) string {
		data := append([]byte{0, 1, 'd', 2, 32}, pk[:]...)
		data = append(data, 3, 4, 0, 0, 0x75, 0x30)
		for pad := n - len(data); pad > 0; {
			v := min(pad-2, MaxTLVValue)
			data = append(data, 9, byte(v))
			data = append(data, make([]byte, v)...)
			pad -= 2 + v
		}
		if len(data) != n {
			t.Fatalf("built %d bytes, want %d", len(data), n)
		}
		return raw(t, "naddr", data)
	}
	at := build(2552)
	if len(at) != MaxLength {
		t.Fatalf("at the limit: %d characters", len(at))
	}
	if e, err := Decode(at); err != nil || e.Address.Identifier != "d" {
		t.Fatalf("%d characters: %v", len(at), err)
	}
	over := build(2553)
	if len(over) != MaxLength+1 {
		t.Fatalf("past the limit: %d characters", len(over))
	}
	if _, err := Decode(over); !errors.Is(err, ErrBech32) {
		t.Fatalf("%d characters: got %v, want ErrBech32", len(over), err)
	}
}
