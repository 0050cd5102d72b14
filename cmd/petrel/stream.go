package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/stream"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

func init() { extraCommands = append(extraCommands, streamCmd) }

// streamFlags are the flags of `petrel stream`.
type streamFlags struct {
	common   commonFlags
	auth     cli.AuthFlags
	dir      string
	local    string
	filter   string
	catchUp  time.Duration
	remember int
	window   int
	jsonOut  bool
}

func streamCmd() *cobra.Command {
	var f streamFlags
	cmd := &cobra.Command{
		Use:   "stream <relay-url> --dir down|up|both",
		Short: "Mirror events live between the local relay and another relay, reconnecting for ever",
		Long: `Stream mirrors the events matching --filter between the local relay (the
petrel serve of the same config, or --local) and <relay-url>, as they
arrive:

  --dir down   events that arrive at <relay-url> are published to the local relay
  --dir up     events that arrive at the local relay are published to <relay-url>
  --dir both   both

Both relays are reached over WebSocket, so the local relay checks and
stores what comes down like any client's event, and pushes it to its
live subscribers.

Stream reconnects for ever (exponential backoff, 1s to 2m). After each
connection it catches up what it missed with a NIP-77 reconciliation of
the two relays (as petrel sync --from does), over the events created from
--catchup before the moment the previous connection was last alive, so
nothing published while it was away is lost. An event is never sent back
to the relay it came from: each connection remembers the last --remember
ids it exchanged.

--auth answers a relay's NIP-42 challenge with the --sec key (or
$NOSTR_SECRET_KEY) when it refuses the live subscription, the catch-up
or a forwarded event with "auth-required:", then asks again, on every
connection (after each reconnection too); the same key serves both
relays. Without --auth, such a relay stops the stream with a message
saying so (reconnecting would not help).

It runs until SIGINT or SIGTERM, logging to stderr; at the end it prints
its counters (--json: as one JSON object).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStream(cmd.Context(), &f, args[0], cmd.OutOrStdout())
		},
	}
	f.common.register(cmd)
	f.auth.Register(cmd)
	_ = cmd.Flags().MarkHidden("data") // no store is opened
	fs := cmd.Flags()
	fs.StringVar(&f.dir, "dir", "", "down (from <relay-url> to the local relay), up (the reverse) or both; required")
	fs.StringVar(&f.local, "local", "", "the local relay's URL (default: ws:// to the config's server.listen)")
	fs.StringVar(&f.filter, "filter", "{}", "NIP-01 filter (JSON) selecting the events to mirror; its limit is ignored")
	fs.DurationVar(&f.catchUp, "catchup", time.Hour, "how far back (by created_at) from the last connection each catch-up reaches; 0: no catch-up")
	fs.IntVar(&f.remember, "remember", 100000, "recently exchanged ids remembered to suppress echoes")
	fs.IntVar(&f.window, "window", 64, "forwarded events awaiting their OK, per direction")
	fs.BoolVar(&f.jsonOut, "json", false, "print the final counters as one JSON object")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// localRelayURL returns the ws:// URL of the relay petrel serve runs with
// cfg: server.listen, with a wildcard host replaced by loopback.
func localRelayURL(cfg config.Config) (string, error) {
	host, port, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil {
		return "", fmt.Errorf("server.listen %q: %w (give --local)", cfg.Server.Listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "ws://" + net.JoinHostPort(host, port), nil
}

func runStream(ctx context.Context, f *streamFlags, remote string, stdout io.Writer) error {
	dir, err := psync.ParseDirection(f.dir)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	flt, err := nostr.ParseFilterStrict([]byte(f.filter), nil)
	if err != nil {
		return fmt.Errorf("--filter: %s", nostr.Reason(err))
	}
	sk, err := f.auth.AuthKey()
	if err != nil {
		return err
	}
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	if remote, err = cli.ParseRelay(remote); err != nil {
		return err
	}
	var local string
	if f.local == "" {
		if local, err = localRelayURL(cfg); err != nil {
			return err
		}
	} else if local, err = cli.ParseRelay(f.local); err != nil {
		return fmt.Errorf("--local: %w", err)
	}
	catchUp := f.catchUp
	if catchUp == 0 {
		catchUp = -1 // the library's "none"
	}
	s, err := stream.New(stream.Options{Local: local, Remote: remote, Direction: dir,
		Filter: flt, CatchUp: catchUp, Remember: f.remember, Window: f.window, AuthKey: sk, Logger: log})
	if err != nil {
		return err
	}
	ctx, stop := cli.Interruptible(ctx)
	defer stop()
	log.Info("streaming", "local", local, "remote", remote, "dir", dir.String())
	if err := s.Run(ctx); err != nil {
		return cli.AuthHint(cli.RelayConnectError(err, 0), sk)
	}
	return printStreamStats(stdout, f.jsonOut, []stream.Stats{s.Stats()}, false)
}

// printStreamStats prints the counters of streams, one line each, or as
// JSON: one object, or an array with many.
func printStreamStats(w io.Writer, jsonOut bool, stats []stream.Stats, many bool) error {
	if jsonOut {
		enc := json.NewEncoder(w)
		if !many && len(stats) == 1 {
			return enc.Encode(stats[0])
		}
		return enc.Encode(stats)
	}
	for _, st := range stats {
		name := st.Remote
		if st.Name != "" {
			name = st.Name + " " + st.Remote
		}
		fmt.Fprintf(w, "%s (%s): %d sessions, %d failures, %d catch-ups", name, st.Direction, st.Sessions, st.Failures, st.CatchUps)
		if st.CatchUpGaps > 0 {
			fmt.Fprintf(w, " (%d gaps)", st.CatchUpGaps)
		}
		d := func(label string, x stream.DirStats) {
			fmt.Fprintf(w, "; %s: %d forwarded, %d caught up, %d duplicate, %d refused, %d echoes",
				label, x.Forwarded, x.CaughtUp, x.Duplicate, x.Refused, x.Echoes)
		}
		if st.Direction != "up" {
			d("down", st.Down)
		}
		if st.Direction != "down" {
			d("up", st.Up)
		}
		fmt.Fprintln(w)
	}
	return nil
}
