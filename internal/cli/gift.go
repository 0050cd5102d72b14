package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nip59"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["gift"] = giftCmd }

func giftCmd() *cobra.Command {
	cmd := Group(&cobra.Command{
		Use:   "gift",
		Short: "Gift-wrap a rumor for recipients, or unwrap gift wraps (NIP-59; NIP-17 direct messages)",
	})
	var wsec secretFlag
	var recipients []string
	var self bool
	wrap := &cobra.Command{
		Use:   "wrap --sec SECRET -p PUBKEY [-p PUBKEY...] [RUMOR]",
		Short: "Read an unsigned event (the rumor) on stdin and print its kind-1059 gift wrap for each recipient",
		Long: `Wrap reads one unsigned event (the rumor) as JSON on stdin (or as the
argument): kind is required; pubkey (must be the sender's), created_at
(default now), tags and content are optional, and an id, if given, must
be the hash of the fields. It seals the rumor (kind 13, signed by --sec) and wraps the seal
(kind 1059, signed by a one-time key) for each -p, and prints one wrap
per line. For a NIP-17 direct message the rumor is kind 14 with a "p"
tag per recipient; --self wraps a copy for the sender too.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sk, err := wsec.key()
			if err != nil {
				return err
			}
			if len(recipients) == 0 && !self {
				return errors.New("-p/--pubkey is required: the recipient's public key")
			}
			var pks []nostr.PubKey
			for _, p := range recipients {
				pk, err := nip19.ParsePubKey(p)
				if err != nil {
					return inputErr("-p", err)
				}
				pks = append(pks, pk)
			}
			if self {
				pks = append(pks, sk.PubKey())
			}
			text, err := textArg(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			data := []byte(strings.TrimPrefix(text, UTF8BOM))
			if strings.TrimSpace(string(data)) == "" {
				return errors.New("no rumor: give the unsigned event as JSON, as an argument or on stdin")
			}
			now := time.Now()
			r, err := nip59.ParseRumor(data, sk.PubKey(), now)
			if err != nil {
				return inputErr("", err)
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			for _, pk := range pks {
				ev, err := nip59.GiftWrap(r, sk, pk, now)
				if err != nil {
					return inputErr("cannot wrap", err)
				}
				w.Write(ev.Raw)
				w.WriteByte('\n')
			}
			return nil
		},
	}
	wsec.register(wrap)
	listArrayVarP(wrap.Flags(), &recipients, "pubkey", "p", "recipient's public key, hex, npub or nprofile (repeatable)")
	wrap.Flags().BoolVar(&self, "self", false, "also wrap a copy for the sender (NIP-17 keeps one)")
	cmd.AddCommand(wrap)

	var usec secretFlag
	unwrap := &cobra.Command{
		Use:   "unwrap --sec SECRET [WRAP]",
		Short: "Read gift wraps (the argument, or one per line on stdin) and print each one's rumor",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sk, err := usec.key()
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			n := 0
			in := cmd.InOrStdin()
			if len(args) > 0 {
				in = strings.NewReader(args[0])
			}
			err = eachLine(in, func(line []byte) error {
				n++
				ev, err := nostr.ParseEvent(line, nil)
				if err != nil {
					return fmt.Errorf("line %d: not an event: %s", n, reason(err))
				}
				r, _, err := nip59.Unwrap(ev, sk, nostr.DefaultVerifier())
				if err != nil {
					return inputErr(fmt.Sprintf("line %d", n), err)
				}
				w.Write(r.JSON())
				return w.WriteByte('\n')
			})
			if err == nil && n == 0 {
				err = errors.New("no gift wrap on stdin")
			}
			return err
		},
	}
	usec.register(unwrap)
	cmd.AddCommand(unwrap)
	return cmd
}
