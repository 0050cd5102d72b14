package nip19

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestParsePubKey(t *testing.T) {
	want := mustPK(t, specNpubHex)
	prof, _ := EncodeProfile(Profile{PubKey: want, Relays: []string{"wss://x.example"}})
	ok := func(s string) {
		t.Helper()
		got, err := ParsePubKey(s)
		if err != nil || got != want {
			t.Errorf("%q: got %s, %v", s, got, err)
		}
	}
	ok(specNpubHex)
	ok(strings.ToUpper(specNpubHex))
	ok("  " + specNpub + "\n")
	ok(strings.ToUpper(specNpub))
	ok(prof)
	bad := func(s string, cause error) {
		t.Helper()
		_, err := ParsePubKey(s)
		if !errors.Is(err, ErrNotPubKey) || (cause != nil && !errors.Is(err, cause)) {
			t.Errorf("%q: got %v", s, err)
		}
	}
	bad(specNsec, ErrPrefix)
	bad(EncodeNote(nostr.ID(want)), ErrPrefix)
	bad(specNpubHex[:63], nil)
	bad(specNpubHex+"0", nil)
	bad("", nil)
	bad("npub1xyz", ErrBech32)
	// Each is told once, by what is wrong with it.
	said := func(s, want string) {
		t.Helper()
		if _, err := ParsePubKey(s); err == nil || err.Error() != want {
			t.Errorf("%q: got %v\nwant %s", s, err, want)
		}
	}
	said("abcd", `nip19: not a public key (64 hex characters, npub or nprofile): "abcd": 4 hex characters, not 64`)
	said("", `nip19: not a public key (64 hex characters, npub or nprofile): "": empty`)
	said("zz", `nip19: not a public key (64 hex characters, npub or nprofile): "zz": not a valid bech32 string: 2 characters, too short to be one`)
	note := EncodeNote(nostr.ID(want))
	said(note, `nip19: not a public key (64 hex characters, npub or nprofile): "`+note+`" is a note`)
	said(specNsec, `nip19: not a public key (64 hex characters, npub or nprofile): an nsec was given`) // never shown
	// Nor a mistyped one.
	typo := specNsec[:len(specNsec)-1] + "q"
	if _, err := ParsePubKey(typo); err == nil || strings.Contains(err.Error(), typo[:20]) || !strings.Contains(err.Error(), "npub or nprofile): not a valid bech32 string: the checksum does not match") {
		t.Errorf("a mistyped nsec: %v", err)
	}
}

func TestParseID(t *testing.T) {
	var want nostr.ID
	copy(want[:], mustPK(t, specNpubHex).Hex())
	ev, _ := EncodeEvent(EventPointer{ID: want, Relays: []string{"wss://x.example"}, Kind: 1, HasKind: true})
	ok := func(s string) {
		t.Helper()
		got, err := ParseID(s)
		if err != nil || got != want {
			t.Errorf("%q: got %s, %v", s, got, err)
		}
	}
	ok(want.Hex())
	ok(strings.ToUpper(want.Hex()))
	ok(EncodeNote(want))
	ok(ev)
	_, err := ParseID(specNpub)
	if !errors.Is(err, ErrNotID) || !errors.Is(err, ErrPrefix) {
		t.Errorf("npub as id: %v", err)
	}
}

func TestParseSecretKey(t *testing.T) {
	ok := func(s string) {
		t.Helper()
		got, err := ParseSecretKey(s)
		if err != nil || got.Hex() != specNsecHex {
			t.Errorf("%q: got %v", s, err)
		}
	}
	ok(specNsecHex)
	ok(strings.ToUpper(specNsecHex))
	ok(specNsec)
	bad := func(name, s string, cause error) {
		t.Helper()
		_, err := ParseSecretKey(s)
		if !errors.Is(err, ErrNotSecretKey) || !errors.Is(err, cause) {
			t.Errorf("%s: got %v", name, err)
		}
		if err != nil && len(s) > 8 && strings.Contains(err.Error(), s) {
			t.Errorf("%s: the error quotes the secret: %v", name, err)
		}
	}
	bad("zero key", strings.Repeat("0", 64), nostr.ErrSecretKey)
	bad("n", "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", nostr.ErrSecretKey)
	var zero nostr.SecretKey
	bad("nsec of zero", EncodeSecretKey(zero), nostr.ErrSecretKey)
	bad("npub", specNpub, ErrPrefix)
	bad("garbage", specNsec[:20], ErrBech32)
}

func TestHexFilter(t *testing.T) {
	pk := mustPK(t, specNpubHex)
	var id nostr.ID
	id[0] = 7
	note := EncodeNote(id)
	addr, _ := EncodeAddress(Address{Identifier: "x", PubKey: pk, Kind: 30023})
	nev, _ := EncodeEvent(EventPointer{ID: id})
	f := func(in, want string) {
		t.Helper()
		got, err := HexFilter([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%s:\n got %s, %v\nwant %s", in, got, err, want)
		}
	}
	f(`{"authors":["`+specNpub+`"],"kinds":[1,7],"limit":10}`,
		`{"authors":["`+specNpubHex+`"],"kinds":[1,7],"limit":10}`)
	f(`[{"ids":["`+note+`","`+nev+`"]},{"#p":["`+strings.ToUpper(specNpubHex)+`"],"#e":["`+note+`"]}]`,
		`[{"ids":["`+id.Hex()+`","`+id.Hex()+`"]},{"#p":["`+strings.ToUpper(specNpubHex)+`"],"#e":["`+id.Hex()+`"]}]`)
	f(`{"#a":["`+addr+`","1:x:y"]}`, `{"#a":["30023:`+specNpubHex+`:x","1:x:y"]}`)
	// Other keys and values are kept, duplicates too.
	f(`{"search":"`+specNpub+`","since":1.5e3,"kinds":[1],"kinds":[2]}`,
		`{"search":"`+specNpub+`","since":1.5e3,"kinds":[1],"kinds":[2]}`)
	// Not JSON, or trailing data: unchanged for the parser to refuse.
	f(`{"authors":["`+specNpub+`"]`, `{"authors":["`+specNpub+`"]`)
	f(`{} {"ids":["1"]}`, `{} {"ids":["1"]}`)
	f(`{}`, `{}`)
	bad := func(in string, want error) {
		t.Helper()
		if _, err := HexFilter([]byte(in)); !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", in, err, want)
		}
	}
	bad(`{"authors":["`+note+`"]}`, ErrNotPubKey)
	bad(`{"ids":["`+specNpub+`"]}`, ErrNotID)
	bad(`{"#e":["note1qqqq"]}`, ErrBech32)
}

func FuzzDecode(f *testing.F) {
	f.Add(specNpub)
	f.Add(specNprofile)
	f.Add(specNsec)
	pk, _ := nostr.ParsePubKey(specNpubHex)
	s, _ := EncodeAddress(Address{Identifier: "x", PubKey: pk, Kind: 30023, Relays: []string{"wss://r"}})
	f.Add(s)
	s, _ = EncodeEvent(EventPointer{ID: nostr.ID(pk), Author: pk, HasAuthor: true, Kind: 1, HasKind: true})
	f.Add(s)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Decode(s)
		if err != nil {
			return
		}
		// What decodes re-encodes to a string that decodes the same.
		var again string
		switch e.Prefix {
		case PrefixPubKey:
			again = EncodePubKey(e.PubKey)
		case PrefixSecretKey:
			again = EncodeSecretKey(e.SecretKey)
		case PrefixNote:
			again = EncodeNote(e.ID)
		case PrefixProfile:
			again, err = EncodeProfile(*e.Profile)
		case PrefixEvent:
			again, err = EncodeEvent(*e.Event)
		case PrefixAddress:
			again, err = EncodeAddress(*e.Address)
		default:
			t.Fatalf("prefix %q", e.Prefix)
		}
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		e2, err := Decode(again)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		j1, _ := json.Marshal(e)
		j2, _ := json.Marshal(e2)
		if string(j1) != string(j2) {
			t.Fatalf("round trip:\n%s\n%s", j1, j2)
		}
	})
}

func FuzzHexFilter(f *testing.F) {
	f.Add(`{"authors":["` + specNpub + `"],"kinds":[1]}`)
	f.Add(`[{"#a":["x"]},{"ids":[]}]`)
	f.Add(`{"#e":[1,{"x":null}],"z":true}`)
	f.Fuzz(func(t *testing.T, in string) {
		out, err := HexFilter([]byte(in))
		if err != nil {
			return
		}
		// Valid JSON in, valid JSON out.
		if json.Valid([]byte(in)) && !json.Valid(out) {
			t.Fatalf("%s -> invalid %s", in, out)
		}
	})
}
