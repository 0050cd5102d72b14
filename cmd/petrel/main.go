// Command petrel is a Nostr relay: `petrel serve` runs it; other
// subcommands load, bench and maintain it, and the client commands (req,
// event, key, encode, decode, ... docs/cli.md) talk to any relay.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	// Runs the client commands before the relay's packages initialise.
	_ "github.com/petrel-relay/petrel/internal/cli/early"
)

// startupTopUp finishes start-up's mapping of the heap (Linux:
// internal/startup.TopUp).
var startupTopUp = func() {}

func main() {
	startupTopUp()
	if code := cli.Run(newRoot(os.Args)); code != 0 {
		os.Exit(code)
	}
}

// newRoot returns the root command for a run with args (os.Args form):
// cli.NewRoot with serve and the other relay-side commands.
func newRoot(args []string) *cobra.Command {
	return cli.NewRoot(args, append([]func() *cobra.Command{serveCmd}, extraCommands...)...)
}

// extraCommands lets subcommand files register themselves.
var extraCommands []func() *cobra.Command
