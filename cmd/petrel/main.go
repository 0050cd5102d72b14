// Command petrel is a Nostr relay: `petrel serve` runs it; other
// subcommands load, bench and maintain it, and the client commands (req,
// event, key, encode, decode, ... docs/cli.md) talk to any relay.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// startupTopUp finishes start-up's mapping of the heap (Linux:
// internal/startup.TopUp).
var startupTopUp = func() {}

func main() {
	startupTopUp()
	if err := newRoot(os.Args).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "petrel:", err)
		os.Exit(1)
	}
}

// newRoot returns the root command for a run with args (os.Args form).
func newRoot(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:           "petrel",
		Short:         "petrel is a fast, bounded Nostr relay",
		SilenceUsage:  true,
		SilenceErrors: true,
		// petrel --version says what petrel version does (worked out
		// only when asked: it loads the verifier). The flag is petrel's,
		// not cobra's Version: cobra prints its version through
		// SetVersionTemplate, and a reachable text/template makes the
		// linker keep every exported method of every type (template
		// execution looks methods up by name), 5 MB more code for
		// every command to start (docs/BENCHMARKS.md, issue 15;
		// TestNoReflectMethodLookup).
		RunE: func(cmd *cobra.Command, args []string) error {
			if v, _ := cmd.Flags().GetBool("version"); v {
				fmt.Fprintln(cmd.OutOrStdout(), versionLine())
				return nil
			}
			return cmd.Help()
		},
	}
	root.Flags().BoolP("version", "v", false, "print the version, Go version and signature verifier (as petrel version)")
	if add, ok := namedCommands[firstArg(args)]; ok {
		// A run of one command builds only that one: the client commands
		// are timed as whole processes, and building every command's
		// flags costs about 0.2 ms (docs/BENCHMARKS.md).
		root.AddCommand(add())
	} else {
		root.AddCommand(serveCmd())
		for _, add := range namedCommands {
			root.AddCommand(add())
		}
		for _, add := range extraCommands {
			root.AddCommand(add())
		}
	}
	root.SetArgs(args[1:])
	return root
}

// extraCommands lets subcommand files register themselves.
var extraCommands []func() *cobra.Command

// namedCommands lets subcommand files register themselves under their
// name (the first word of Use), so that running one builds only it.
var namedCommands = map[string]func() *cobra.Command{"version": versionCmd}

// firstArg returns args[1] when it may name a command (not a flag).
func firstArg(args []string) string {
	if len(args) < 2 || len(args[1]) == 0 || args[1][0] == '-' {
		return ""
	}
	return args[1]
}
