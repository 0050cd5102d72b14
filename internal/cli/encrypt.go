package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nip44"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["encrypt"] = encryptCmd }

// cryptFlags are the flags of encrypt and decrypt.
type cryptFlags struct {
	sec   secretFlag
	peer  string
	nip04 bool
}

func (f *cryptFlags) register(cmd *cobra.Command, peerHelp string) {
	f.sec.register(cmd)
	cmd.Flags().StringVarP(&f.peer, "pubkey", "p", "", peerHelp+" (hex, npub or nprofile)")
	cmd.Flags().BoolVar(&f.nip04, "nip04", false, "the legacy NIP-04 scheme (kind-4 messages) instead of NIP-44 v2")
}

// keys returns the secret key and the peer's public key.
func (f *cryptFlags) keys() (nostr.SecretKey, nostr.PubKey, error) {
	sk, err := f.sec.key()
	if err != nil {
		return sk, nostr.PubKey{}, err
	}
	if f.peer == "" {
		return sk, nostr.PubKey{}, errors.New("-p/--pubkey is required: the other party's public key")
	}
	pk, err := nip19.ParsePubKey(f.peer)
	return sk, pk, err
}

// textArg returns args[0], or all of stdin without its final newline.
func textArg(args []string, stdin io.Reader) (string, error) {
	if len(args) > 0 {
		return args[0], nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxTextInput+1))
	if err != nil {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	if len(b) > maxTextInput {
		return "", fmt.Errorf("%w: more than %d bytes", errInputTooLong, maxTextInput)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

func encryptCmd() *cobra.Command {
	var f cryptFlags
	cmd := &cobra.Command{
		Use:   "encrypt --sec SECRET -p PUBKEY [TEXT]",
		Short: "Encrypt TEXT (or stdin) for PUBKEY with NIP-44 v2 (or NIP-04 with --nip04) and print the payload",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sk, pk, err := f.keys()
			if err != nil {
				return err
			}
			text, err := textArg(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			var out string
			if f.nip04 {
				out, err = nip44.EncryptNIP04(sk, pk, text)
			} else {
				var ck nip44.ConversationKey
				if ck, err = nip44.NewConversationKey(sk, pk); err == nil {
					out, err = nip44.Encrypt(ck, text)
				}
			}
			if err != nil {
				return inputErr("cannot encrypt", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), out)
			return err
		},
	}
	f.register(cmd, "the recipient's public key")
	return cmd
}
