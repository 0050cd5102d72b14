package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["count"] = countCmd }

func countCmd() *cobra.Command {
	var filter filterFlagSet
	var conn connFlags
	var st storeFlags
	cmd := &cobra.Command{
		Use:   "count [filter flags] relay...",
		Short: "Ask relays (or a local store with --store) how many events match (NIP-45)",
		Long: `Count sends a NIP-45 COUNT with the filter the flags describe. With one
relay (or --store) it prints the number; with several, one line per
relay: "<relay> <count>" ("~" before the count when the relay says it is
approximate). Limits do not apply to counts.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := filter.filter(cmd, time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if st.dir != "" {
				if len(args) > 0 {
					return errors.New("--store reads a local store: give no relay with it")
				}
				n, err := st.count(cmd.Context(), []nostr.Filter{f})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(out, n)
				return err
			}
			if len(args) == 0 {
				return errors.New("give a relay (or --store DIR)")
			}
			relays, err := relayURLs(args)
			if err != nil {
				return err
			}
			sk, err := conn.AuthKey()
			if err != nil {
				return err
			}
			ctx, cancel := Interruptible(cmd.Context())
			defer cancel()
			var mu sync.Mutex
			return eachRelay(relays, cmd.ErrOrStderr(), func(url string) error {
				m, err := countRelay(ctx, url, f, &conn, sk)
				if err != nil {
					return err
				}
				approx := ""
				if m.Approximate {
					approx = "~"
				}
				mu.Lock()
				defer mu.Unlock()
				if len(relays) == 1 {
					_, err = fmt.Fprintf(out, "%s%d\n", approx, m.Count)
				} else {
					_, err = fmt.Fprintf(out, "%s %s%d\n", url, approx, m.Count)
				}
				return err
			})
		},
	}
	filter.register(cmd)
	conn.register(cmd)
	st.register(cmd)
	return cmd
}

func countRelay(ctx context.Context, url string, f nostr.Filter, conn *connFlags, sk *nostr.SecretKey) (*nostr.RelayMessage, error) {
	c, err := conn.dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for authed := false; ; authed = true {
		cctx, cancel := context.WithTimeout(ctx, conn.timeout)
		m, err := c.Count(cctx, subID, f)
		cancel()
		if err == nil || !errors.Is(err, client.ErrAuthRequired) || sk == nil || authed {
			return m, AuthHint(tellClosed(err), sk)
		}
		if err := client.Authenticate(ctx, c, sk, conn.timeout); err != nil {
			return nil, err
		}
	}
}
