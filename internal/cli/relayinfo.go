package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/client"
)

func init() { commands["relay"] = relayInfoCmd }

func relayInfoCmd() *cobra.Command {
	var conn connFlags
	cmd := &cobra.Command{
		Use:   "relay URL",
		Short: "Print a relay's NIP-11 information document",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseRelayOrHTTP(args[0])
			if err != nil {
				return err
			}
			// Errors name the URL as given (http://... is asked over
			// HTTP), or the completed one when no scheme was given.
			shown := u
			if strings.Contains(args[0], "://") {
				shown = args[0]
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), conn.timeout)
			defer cancel()
			inf, err := client.FetchInfo(ctx, nil, u)
			if err != nil {
				var ie *client.InfoError
				if errors.As(err, &ie) {
					return fmt.Errorf("%s: no usable NIP-11 document: %s", shown, ie.Reason)
				}
				if told := connectError(err, conn.timeout); told != err {
					return fmt.Errorf("%s: %w", shown, told)
				}
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", strings.TrimSpace(string(inf.Raw)))
			return err
		},
	}
	timeoutVar(cmd.Flags(), &conn.timeout, 10*time.Second, "how long to wait for the relay")
	return cmd
}

// parseRelayOrHTTP is ParseRelay, also taking an http:// or https://
// URL (the same host's ws:// or wss://): NIP-11 and NIP-86 are HTTP. The
// error names the argument as given.
func parseRelayOrHTTP(a string) (string, error) {
	s := a
	switch {
	case strings.HasPrefix(s, "http://"):
		s = "ws://" + s[len("http://"):]
	case strings.HasPrefix(s, "https://"):
		s = "wss://" + s[len("https://"):]
	}
	u, err := ParseRelay(s)
	if err != nil {
		return "", fmt.Errorf("%q: not a relay: give host[:port], or a ws://, wss://, http:// or https:// URL", a)
	}
	return u, nil
}
