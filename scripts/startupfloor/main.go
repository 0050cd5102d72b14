// Command startupfloor is what `petrel version` would cost if the binary
// linked only what the client commands need (cobra, internal/nostr with
// libsecp256k1, internal/client, the NIP packages) and nothing
// relay-side: scripts/bench-cli.sh times it beside petrel version to
// show how much of petrel's start-up is the relay's package
// initialisation (docs/BENCHMARKS.md, "Client commands").
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	_ "github.com/petrel-relay/petrel/internal/client"
	_ "github.com/petrel-relay/petrel/internal/nip13"
	_ "github.com/petrel-relay/petrel/internal/nip19"
	_ "github.com/petrel-relay/petrel/internal/nip44"
	_ "github.com/petrel-relay/petrel/internal/nip49"
	_ "github.com/petrel-relay/petrel/internal/nip59"
	"github.com/petrel-relay/petrel/internal/nostr"
	_ "github.com/petrel-relay/petrel/internal/startup"
)

func main() {
	root := &cobra.Command{Use: "startupfloor", SilenceUsage: true}
	root.AddCommand(&cobra.Command{
		Use: "version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "startupfloor (%s, verifier %s)\n", runtime.Version(), nostr.DefaultVerifier().Name())
			return err
		},
	})
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
