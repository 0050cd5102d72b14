package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/stream"
)

func init() { extraCommands = append(extraCommands, routerCmd) }

// routerFlags are the flags of `petrel router`.
type routerFlags struct {
	common  commonFlags
	auth    cli.AuthFlags
	jsonOut bool
}

func routerCmd() *cobra.Command {
	var f routerFlags
	cmd := &cobra.Command{
		Use:   "router <router.toml>",
		Short: "Run many streams (petrel stream) from one config file, like strfry router",
		Long: `Router runs one petrel stream per relay listed in a TOML file: groups of
relays that share a direction (down, up, both) and a filter, all mirrored
with the local relay (the file's "local", or ws:// to the server.listen of
the petrel config given with --config). deploy/router.example.toml
documents every key.

Each stream reconnects for ever, catches up with NIP-77 after each
connection and suppresses echoes, as petrel stream does. --auth
answers a relay's NIP-42 challenge with the --sec key (or
$NOSTR_SECRET_KEY), the same key for every stream and for both relays
of each; without it a stream whose relay requires authentication stops,
with an error in the log.

SIGHUP reloads the file: streams whose settings did not change keep
running, the others are stopped or started, and those that stopped (a
relay that required authentication) are started again; a file with an
error is logged and the running streams are kept. It runs until SIGINT
or SIGTERM and then prints every stream's counters (--json: a JSON
array).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRouter(cmd.Context(), &f, args[0], cmd.OutOrStdout())
		},
	}
	f.common.register(cmd)
	f.auth.Register(cmd)
	_ = cmd.Flags().MarkHidden("data") // no store is opened
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print the final counters as a JSON array")
	return cmd
}

// routerReload delivers SIGHUP to runRouter; tests replace it.
var routerReload = defaultRouterReload

func defaultRouterReload() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}

// routerStreams reads the router file and returns its streams, each
// authenticating with sk if it is not nil.
func routerStreams(path, local string, sk *nostr.SecretKey, log *slog.Logger) ([]stream.Options, error) {
	rc, err := stream.LoadRouterConfig(path)
	if err != nil {
		return nil, err
	}
	opts, err := rc.Streams(local, cli.RelayURL, log)
	if err != nil {
		return nil, err
	}
	for i := range opts {
		opts[i].AuthKey = sk
	}
	return opts, nil
}

func runRouter(ctx context.Context, f *routerFlags, path string, stdout io.Writer) error {
	sk, err := f.auth.AuthKey()
	if err != nil {
		return err
	}
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	// The default local relay; an error only matters if the file names
	// none, which Streams then reports.
	local, _ := localRelayURL(cfg)
	opts, err := routerStreams(path, local, sk, log)
	if err != nil {
		return err
	}
	ctx, stop := cli.Interruptible(ctx)
	defer stop()
	r := stream.NewRouter(ctx, log)
	if _, _, _, err := r.Apply(opts); err != nil {
		return err
	}
	log.Info("router started", "file", path, "streams", len(opts))
	hup, unhook := routerReload()
	defer unhook()
	for done := false; !done; {
		select {
		case <-hup:
			opts, err := routerStreams(path, local, sk, log)
			if err == nil {
				var started, stopped, kept int
				started, stopped, kept, err = r.Apply(opts)
				if err == nil {
					log.Info("router reloaded", "file", path, "started", started, "stopped", stopped, "kept", kept)
				}
			}
			if err != nil {
				log.Error("router reload failed; the running streams are kept", "file", path, "err", err)
			}
		case <-ctx.Done():
			done = true
		}
	}
	r.Wait()
	return printStreamStats(stdout, f.jsonOut, r.Stats(), true)
}
