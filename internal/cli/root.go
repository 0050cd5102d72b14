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
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

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
		//
		// An unknown command is refused here rather than by cobra,
		// whose complaint takes three lines ("Did you mean this?").
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			if v, _ := cmd.Flags().GetBool("version"); v {
				fmt.Fprintln(cmd.OutOrStdout(), versionLine())
				return nil
			}
			return cmd.Help()
		},
	}
	root.SetFlagErrorFunc(flagError)
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
	if cmd, err := root.ExecuteC(); err != nil {
		fmt.Fprintln(os.Stderr, "petrel:", withUsage(cmd, err))
		return 1
	}
	return 0
}

// withUsage adds the command's usage line to cobra's complaint about the
// number of arguments ("accepts 1 arg(s), received 0"), which says
// neither which command nor what the arguments are; usage is not
// printed otherwise (SilenceUsage).
func withUsage(cmd *cobra.Command, err error) error {
	if cmd == nil || !strings.Contains(err.Error(), " arg(s)") {
		return err
	}
	return fmt.Errorf("%w; usage: %s", err, cmd.UseLine())
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
// SIGTERM, for commands that stop cleanly when their context ends. A
// second signal while the command stops (SecondSignal: another one, or
// the same one past SignalEcho) ends the process at once with status 1,
// so that a stop that hangs (a store's final flush, an unresponsive
// relay) can be cut short as a user expects of a second Ctrl-C. The
// returned function stops catching the signals and cancels the context.
func Interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var first os.Signal
		var at time.Time
		for {
			select {
			case <-done:
				return
			case s := <-sig:
				now := time.Now()
				if first == nil {
					first, at = s, now
					cancel()
				} else if SecondSignal(first, at, s, now) {
					fmt.Fprintf(os.Stderr, "petrel: second signal %v after %v: exiting now\n", s, now.Sub(at).Round(time.Millisecond))
					os.Exit(1)
				}
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
		})
		cancel()
	}
}

// SignalEcho is how soon after the first the same signal again is taken
// for the first, echoed: GNU timeout (and other supervisors) signal the
// command and then its whole process group, so `timeout 1h petrel serve`
// gets SIGTERM twice within a millisecond. Far longer than a loaded
// machine delays the pair; a person who presses Ctrl-C again because the
// stop seems stuck does so later.
const SignalEcho = 500 * time.Millisecond

// SecondSignal reports whether sig, received at now while a stop that
// first (received at t0) started is under way, asks to exit at once:
// another signal, or the same one at SignalEcho or later.
func SecondSignal(first os.Signal, t0 time.Time, sig os.Signal, now time.Time) bool {
	return sig != first || now.Sub(t0) >= SignalEcho
}

// Group makes cmd, a command that only holds subcommands, refuse an
// unknown one (`petrel key nosuch`: an error, status 1) where cobra would
// print the help and exit 0, so that a script's typo fails. Without an
// argument it prints the help, as before.
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommand(cmd, args[0])
	}
	return cmd
}

// unknownCommand is the one-line error of a subcommand of cmd that does
// not exist, naming those it may have meant (cobra's suggestions: a few
// edits away, or a prefix).
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set where it suggests
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return errors.New(msg)
}
