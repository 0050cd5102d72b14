package cli

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["encode"] = encodeCmd }

func encodeCmd() *cobra.Command {
	cmd := Group(&cobra.Command{
		Use:   "encode",
		Short: "Encode keys, ids and pointers as NIP-19 bech32 (npub, nsec, note, nprofile, nevent, naddr)",
		Long: `Encode prints the NIP-19 form of each input (arguments, or one per line
on stdin). Inputs may be hex or any bech32 form that carries the value
(an npub for nprofile, a note for nevent).

  petrel encode npub|nsec|note HEX...
  petrel encode nprofile HEX [--relay URL...]
  petrel encode nevent HEX [--relay URL...] [--author PUBKEY] [--kind N]
  petrel encode naddr --pubkey PUBKEY --kind N --identifier D [--relay URL...]`,
	})
	simple := func(name, short string, enc func(string) (string, error)) *cobra.Command {
		return &cobra.Command{
			Use:   name + " [HEX...]",
			Short: short,
			RunE: func(cmd *cobra.Command, args []string) error {
				return encodeEach(cmd, args, enc)
			},
		}
	}
	cmd.AddCommand(simple("npub", "Encode public keys", func(s string) (string, error) {
		pk, err := nip19.ParsePubKey(s)
		return nip19.EncodePubKey(pk), err
	}))
	cmd.AddCommand(simple("nsec", "Encode secret keys", func(s string) (string, error) {
		sk, err := nip19.ParseSecretKey(s)
		return nip19.EncodeSecretKey(sk), err
	}))
	cmd.AddCommand(simple("note", "Encode event ids", func(s string) (string, error) {
		id, err := nip19.ParseID(s)
		return nip19.EncodeNote(id), err
	}))

	var relays []string
	prof := &cobra.Command{
		Use:   "nprofile [HEX...]",
		Short: "Encode public keys with relay hints",
		RunE: func(cmd *cobra.Command, args []string) error {
			hints, err := relayHints(relays)
			if err != nil {
				return err
			}
			return encodeEach(cmd, args, func(s string) (string, error) {
				pk, err := nip19.ParsePubKey(s)
				if err != nil {
					return "", err
				}
				return nip19.EncodeProfile(nip19.Profile{PubKey: pk, Relays: hints})
			})
		},
	}
	listArrayVarP(prof.Flags(), &relays, "relay", "r", "relay hint (repeatable)")
	cmd.AddCommand(prof)

	var evRelays []string
	var author string
	var kind int
	ev := &cobra.Command{
		Use:   "nevent [HEX...]",
		Short: "Encode event ids with relay hints, author and kind",
		RunE: func(cmd *cobra.Command, args []string) error {
			hints, err := relayHints(evRelays)
			if err != nil {
				return err
			}
			p := nip19.EventPointer{Relays: hints}
			if author != "" {
				pk, err := nip19.ParsePubKey(author)
				if err != nil {
					return inputErr("--author", err)
				}
				p.Author, p.HasAuthor = pk, true
			}
			if cmd.Flags().Changed("kind") {
				if kind < 0 || kind > nostr.MaxKind {
					return fmt.Errorf("--kind %d: outside 0-%d", kind, nostr.MaxKind)
				}
				p.Kind, p.HasKind = uint32(kind), true
			}
			return encodeEach(cmd, args, func(s string) (string, error) {
				id, err := nip19.ParseID(s)
				if err != nil {
					return "", err
				}
				p.ID = id
				return nip19.EncodeEvent(p)
			})
		},
	}
	listArrayVarP(ev.Flags(), &evRelays, "relay", "r", "relay hint (repeatable)")
	ev.Flags().StringVarP(&author, "author", "a", "", "author's public key (hex or npub)")
	ev.Flags().IntVarP(&kind, "kind", "k", 0, "the event's kind")
	cmd.AddCommand(ev)

	var aRelays []string
	var pubkey, ident string
	var aKind int
	addr := &cobra.Command{
		Use:   "naddr --pubkey PUBKEY --kind N --identifier D",
		Short: "Encode the address of an addressable event",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pubkey == "" || !cmd.Flags().Changed("kind") || !cmd.Flags().Changed("identifier") {
				return errors.New("naddr needs --pubkey, --kind and --identifier")
			}
			pk, err := nip19.ParsePubKey(pubkey)
			if err != nil {
				return inputErr("--pubkey", err)
			}
			if aKind < 0 || aKind > nostr.MaxKind {
				return fmt.Errorf("--kind %d: outside 0-%d", aKind, nostr.MaxKind)
			}
			hints, err := relayHints(aRelays)
			if err != nil {
				return err
			}
			s, err := nip19.EncodeAddress(nip19.Address{Identifier: ident, PubKey: pk, Kind: uint32(aKind), Relays: hints})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), s)
			return err
		},
	}
	listArrayVarP(addr.Flags(), &aRelays, "relay", "r", "relay hint (repeatable)")
	addr.Flags().StringVarP(&pubkey, "pubkey", "p", "", "author's public key (hex or npub)")
	addr.Flags().IntVarP(&aKind, "kind", "k", 0, "the event's kind")
	addr.Flags().StringVarP(&ident, "identifier", "d", "", "the event's d tag")
	cmd.AddCommand(addr)
	return cmd
}

// relayHints completes --relay hints as a relay argument is completed
// (relay.example is wss://relay.example), so that a code carries URLs a
// client can dial, and refuses what is not a relay URL.
func relayHints(flag []string) ([]string, error) {
	if len(flag) == 0 {
		return nil, nil
	}
	hints, err := relayURLs(flag)
	if err != nil {
		return nil, fmt.Errorf("--relay: %w", err)
	}
	return hints, nil
}

// encodeEach prints enc of every input (arguments or stdin lines).
func encodeEach(cmd *cobra.Command, args []string, enc func(string) (string, error)) error {
	ins, err := inputs(args, cmd.InOrStdin())
	if err != nil {
		return err
	}
	w := bufio.NewWriter(cmd.OutOrStdout())
	defer w.Flush()
	for _, in := range ins {
		s, err := enc(in)
		if err != nil {
			return inputErr("", err)
		}
		fmt.Fprintln(w, s)
	}
	return nil
}
