package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nip44"
)

func init() { commands["decrypt"] = decryptCmd }

func decryptCmd() *cobra.Command {
	var f cryptFlags
	cmd := &cobra.Command{
		Use:   "decrypt --sec SECRET -p PUBKEY [PAYLOAD]",
		Short: "Decrypt a NIP-44 v2 payload (or NIP-04 with --nip04) from PUBKEY, given or on stdin, and print the text",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sk, pk, err := f.keys()
			if err != nil {
				return err
			}
			payload, err := textArg(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			payload = strings.TrimSpace(payload)
			var text string
			if f.nip04 {
				text, err = nip44.DecryptNIP04(sk, pk, payload)
			} else {
				var ck nip44.ConversationKey
				if ck, err = nip44.NewConversationKey(sk, pk); err == nil {
					text, err = nip44.Decrypt(ck, payload)
				}
			}
			if errors.Is(err, nip44.ErrMAC) {
				return inputErr("cannot decrypt (not encrypted between these two keys, or altered)", err)
			}
			if err != nil {
				return inputErr("cannot decrypt", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), text)
			return err
		},
	}
	f.register(cmd, "the sender's public key")
	return cmd
}
