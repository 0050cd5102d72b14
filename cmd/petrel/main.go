// Command petrel is a Nostr relay: `petrel serve` runs it; the other
// subcommands load, bench and maintain it.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:           "petrel",
		Short:         "petrel is a fast, bounded Nostr relay",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), versionCmd())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "petrel:", err)
		os.Exit(1)
	}
}

// extraCommands lets subcommand files register themselves.
var extraCommands []func() *cobra.Command
