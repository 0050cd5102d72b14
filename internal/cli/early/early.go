// Package early runs petrel's client commands before the relay's
// packages are initialised. cmd/petrel imports it for that side effect
// only.
//
// Go initialises a program's packages one by one, each after the packages
// it imports, before main starts; in petrel's binary that includes the
// relay's (the server, pebble and its error-reporting tree, NATS,
// PostgreSQL, Prometheus), whose initialisation a client command does not
// need. This package imports only package cli (the client commands) and
// internal/startup, so its init runs as soon as those are ready: about
// 195th of petrel's 235 packages. When os.Args name a client command cli
// can run alone (cli.Early), init runs it there and exits the process
// with its exit code, and the remaining packages are never initialised:
// `petrel version` about 0.9 ms sooner on the test guest
// (docs/BENCHMARKS.md, issue 15). Otherwise init returns and main runs
// the command as usual. Everything the command reaches is initialised
// (Go initialises a package's imports first), so running it from init is
// safe; what cmd/petrel would set up for it (cli.LocalStore) is not, and
// cli.Early leaves those runs to main.
package early

import (
	"os"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/startup"
)

func init() {
	if !cli.Early(os.Args) {
		return
	}
	startup.TopUp() // as main does first
	os.Exit(cli.Run(cli.NewRoot(os.Args)))
}
