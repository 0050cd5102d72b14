package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["verify"] = verifyCmd }

func verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify [EVENT]",
		Short: "Check the id and signature of events (an argument, or one per line on stdin)",
		Long: `Verify checks each event's id (the hash of its fields) and signature.
Valid events print nothing; each invalid one prints one line on stderr
("line N: <id>: ..."), and the exit status is 1 if any was invalid.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := nostr.DefaultVerifier()
			bad, n := 0, 0
			check := func(line []byte) error {
				n++
				ev, err := nostr.ParseEvent(line, nil)
				switch {
				case err != nil:
					fmt.Fprintf(cmd.ErrOrStderr(), "line %d: not an event: %s\n", n, reason(err))
				case !nostr.CheckID(ev):
					fmt.Fprintf(cmd.ErrOrStderr(), "line %d: %s: the id is not the hash of the event (want %s)\n", n, ev.ID.Hex(), nostr.ComputeID(ev).Hex())
				case !nostr.VerifyEvent(v, ev):
					fmt.Fprintf(cmd.ErrOrStderr(), "line %d: %s: bad signature\n", n, ev.ID.Hex())
				default:
					return nil
				}
				bad++
				return nil
			}
			var err error
			if len(args) > 0 {
				err = check([]byte(args[0]))
			} else {
				err = eachLine(cmd.InOrStdin(), check)
			}
			switch {
			case err != nil:
				return err
			case n == 0:
				return errors.New("no event to verify: give one as an argument or on stdin")
			case bad > 0:
				return fmt.Errorf("%d of %d events invalid", bad, n)
			}
			return nil
		},
	}
}
