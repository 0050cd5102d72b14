// Package cli holds petrel's client commands (req, count, event, key,
// encode, decode, encrypt, decrypt, gift, verify, fetch, relay, admin,
// version: docs/cli.md) and the root command every run of petrel starts
// from. It links nothing of the relay's (no server, store engine, bus or
// metrics), so that package early can run these commands before the
// relay's packages are initialised; cmd/petrel adds the relay's commands
// to the same root.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with
// -ldflags "-X github.com/petrel-relay/petrel/internal/cli.version=...".
var version = "dev"

// commands are the client commands by name (the first word of Use): a run
// of one builds only it.
var commands = map[string]func() *cobra.Command{"version": versionCmd}

// NewRoot returns the root command for a run with args (os.Args form).
// When args name a client command, the root holds only that one:
// building every command's flags costs about 0.2 ms, and the client
// commands are timed as whole processes (docs/BENCHMARKS.md). Otherwise
// it holds the client commands and the others cmd/petrel gives.
func NewRoot(args []string, others ...func() *cobra.Command) *cobra.Command {
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
	if add, ok := commands[firstArg(args)]; ok {
		root.AddCommand(add())
	} else {
		for _, add := range others {
			root.AddCommand(add())
		}
		for _, add := range commands {
			root.AddCommand(add())
		}
	}
	root.SetArgs(args[1:])
	return root
}

// Run executes root and returns the process's exit code, having printed
// a failure as one line on stderr.
func Run(root *cobra.Command) int {
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "petrel:", err)
		return 1
	}
	return 0
}

// isCommand reports whether name is a client command's.
func isCommand(name string) bool {
	_, ok := commands[name]
	return ok
}

// Command builds the client command named name (nil if there is none).
func Command(name string) *cobra.Command {
	if add, ok := commands[name]; ok {
		return add()
	}
	return nil
}

// firstArg returns args[1] when it may name a command (not a flag).
func firstArg(args []string) string {
	if len(args) < 2 || len(args[1]) == 0 || args[1][0] == '-' {
		return ""
	}
	return args[1]
}

// Interruptible returns ctx (Background if nil), cancelled by SIGINT or
// SIGTERM, for commands that stop cleanly when their context ends.
func Interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
