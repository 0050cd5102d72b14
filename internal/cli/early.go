package cli

import "strings"

// Early reports whether the run with args (os.Args form) is one package
// early may run before the relay's packages are initialised: a client
// command (or petrel --version), and with --store only when a running
// relay serves that store (the command then asks it through the control
// socket; opening the store itself needs the store engine, LocalStore).
// Anything else is left to cmd/petrel's main, which runs every command,
// client ones included.
func Early(args []string) bool {
	if len(args) == 2 && (args[1] == "--version" || args[1] == "-v") {
		return true
	}
	if !isCommand(firstArg(args)) {
		return false
	}
	dir, ok := storeArg(args[2:])
	if !ok {
		return true
	}
	return dir != "" && ControlServed(dir)
}

// storeArg finds --store among a command's arguments (up to "--", after
// which every argument is positional): its value and whether it is
// given. An argument that only looks like the flag (the value of another
// flag, say) errs on the side of main, which handles it either way.
func storeArg(args []string) (dir string, given bool) {
	for i, a := range args {
		switch {
		case a == "--":
			return dir, given
		case a == "--store":
			given = true
			if i+1 < len(args) {
				dir = args[i+1]
			}
		case strings.HasPrefix(a, "--store="):
			given, dir = true, strings.TrimPrefix(a, "--store=")
		}
	}
	return dir, given
}
