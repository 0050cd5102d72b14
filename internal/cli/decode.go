package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nip49"
)

func init() { commands["decode"] = decodeCmd }

func decodeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "decode [CODE...]",
		Short: "Decode NIP-19 strings: hex for npub, nsec and note, one JSON object for nprofile, nevent and naddr",
		Long: `Decode reads NIP-19 strings (arguments, or one per line on stdin; a
"nostr:" prefix is accepted) and prints, one line each: the hex key or
id of an npub, nsec or note, and for the TLV forms a JSON object with
NIP-19's field names:

  nprofile  {"pubkey":"…","relays":[…]}
  nevent    {"id":"…","relays":[…],"author":"…","kind":N}  (author, kind when present)
  naddr     {"identifier":"…","pubkey":"…","kind":N,"relays":[…]}

An ncryptsec is not decoded here: use petrel key decrypt.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ins, err := inputs(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			for _, in := range ins {
				if err := decodeOne(w, strings.TrimPrefix(in, "nostr:")); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// The JSON shapes of the TLV forms.
type (
	profileJSON struct {
		PubKey string   `json:"pubkey"`
		Relays []string `json:"relays"`
	}
	eventJSON struct {
		ID     string   `json:"id"`
		Relays []string `json:"relays"`
		Author string   `json:"author,omitempty"`
		Kind   *uint32  `json:"kind,omitempty"`
	}
	addressJSON struct {
		Identifier string   `json:"identifier"`
		PubKey     string   `json:"pubkey"`
		Kind       uint32   `json:"kind"`
		Relays     []string `json:"relays"`
	}
)

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func decodeOne(w io.Writer, s string) error {
	if strings.HasPrefix(strings.ToLower(s), nip49.Prefix+"1") {
		return fmt.Errorf("%s…: an ncryptsec is a password-encrypted key: use petrel key decrypt", s[:min(len(s), 16)])
	}
	e, err := nip19.Decode(s)
	if err != nil {
		// Which of the inputs, and why, once (not "nip19:").
		return fmt.Errorf("%s: %s", nip19.Shown(s), reason(err))
	}
	var v any
	switch e.Prefix {
	case nip19.PrefixPubKey:
		_, err = fmt.Fprintln(w, e.PubKey.Hex())
		return err
	case nip19.PrefixSecretKey:
		_, err = fmt.Fprintln(w, e.SecretKey.Hex())
		return err
	case nip19.PrefixNote:
		_, err = fmt.Fprintln(w, e.ID.Hex())
		return err
	case nip19.PrefixProfile:
		v = profileJSON{PubKey: e.Profile.PubKey.Hex(), Relays: nonNil(e.Profile.Relays)}
	case nip19.PrefixEvent:
		j := eventJSON{ID: e.Event.ID.Hex(), Relays: nonNil(e.Event.Relays)}
		if e.Event.HasAuthor {
			j.Author = e.Event.Author.Hex()
		}
		if e.Event.HasKind {
			j.Kind = &e.Event.Kind
		}
		v = j
	case nip19.PrefixAddress:
		a := e.Address
		v = addressJSON{Identifier: a.Identifier, PubKey: a.PubKey.Hex(), Kind: a.Kind, Relays: nonNil(a.Relays)}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
