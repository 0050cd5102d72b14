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
	// Start-up maps the pages it is about to touch, and a client command
	// runs with a 1 ms timer slack.
	"github.com/petrel-relay/petrel/internal/startup"
)

func main() {
	startup.TopUp() // what start-up's mapping of the heap left out
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
