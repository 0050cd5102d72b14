package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nip49"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["key"] = keyCmd }

func keyCmd() *cobra.Command {
	cmd := Group(&cobra.Command{
		Use:   "key",
		Short: "Generate keys, derive public keys, encrypt keys with a password (NIP-49)",
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "generate",
		Short: "Print a new random secret key (hex)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), nostr.GenerateKey().Hex())
			return err
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "public [SECRET...]",
		Short: "Print the hex public key of each secret key (hex or nsec; arguments or stdin lines)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ins, err := inputs(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			for i, in := range ins {
				sk, err := nip19.ParseSecretKey(in)
				if err != nil {
					if len(ins) > 1 {
						// Which one: a secret is not quoted.
						return inputErr(fmt.Sprintf("secret key %d of %d", i+1, len(ins)), err)
					}
					return inputErr("", err)
				}
				fmt.Fprintln(w, sk.PubKey().Hex())
			}
			return nil
		},
	})
	var logN uint8
	var security string
	enc := &cobra.Command{
		Use:   "encrypt SECRET [PASSWORD]",
		Short: "Encrypt a secret key with a password into an ncryptsec (NIP-49); the password is read from stdin when not given",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if logN < 1 || logN > nip49.MaxLogN {
				return fmt.Errorf("--log-n %d: want 1 to %d", logN, nip49.MaxLogN)
			}
			sk, err := nip19.ParseSecretKey(args[0])
			if err != nil {
				return inputErr("", err)
			}
			pw, err := password(args[1:], cmd.InOrStdin())
			if err != nil {
				return err
			}
			if pw == "" {
				// Most often an unset variable ("$PASSWORD"): the
				// ncryptsec would open for anyone.
				return errors.New("empty password: the ncryptsec would open for anyone")
			}
			ks, err := keySecurity(security)
			if err != nil {
				return err
			}
			s, err := nip49.Encrypt(sk, pw, logN, ks)
			if err != nil {
				return inputErr("", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), s)
			return err
		},
	}
	enc.Flags().Uint8Var(&logN, "log-n", nip49.DefaultLogN, fmt.Sprintf("scrypt cost: log2 of N (memory 1 KiB × 2^N; at most %d)", nip49.MaxLogN))
	enc.Flags().StringVar(&security, "key-security", "unknown", "how the key was handled: insecure, secure or unknown (NIP-49's byte)")
	cmd.AddCommand(enc)
	cmd.AddCommand(&cobra.Command{
		Use:   "decrypt NCRYPTSEC [PASSWORD]",
		Short: "Decrypt an ncryptsec (NIP-49) and print the hex secret key; the password is read from stdin when not given",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := password(args[1:], cmd.InOrStdin())
			if err != nil {
				return err
			}
			sk, _, err := nip49.Decrypt(args[0], pw)
			if err != nil && !errors.Is(err, nip49.ErrKeySecurity) {
				return inputErr("", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), sk.Hex())
			return err
		},
	})
	return cmd
}

// password returns args[0], or the first line of stdin.
func password(args []string, stdin io.Reader) (string, error) {
	if len(args) > 0 {
		return args[0], nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && (err != io.EOF || line == "") {
		return "", errors.New("no password: give it as an argument or on stdin")
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func keySecurity(s string) (nip49.KeySecurity, error) {
	switch s {
	case "insecure":
		return nip49.KnownInsecure, nil
	case "secure":
		return nip49.NotKnownInsecure, nil
	case "unknown", "":
		return nip49.Unknown, nil
	}
	return 0, fmt.Errorf("--key-security %q: want insecure, secure or unknown", s)
}
