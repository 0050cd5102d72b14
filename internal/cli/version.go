package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// BuildVersion is the version petrel was built as: the -ldflags one, or
// "dev-" and the commit.
func BuildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return version
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, Go version and signature verifier",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine is what petrel version and petrel --version print.
func versionLine() string {
	return fmt.Sprintf("petrel %s (%s, %s/%s, verifier %s)",
		BuildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH, nostr.DefaultVerifier().Name())
}
