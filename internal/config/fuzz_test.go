package config

import (
	"os"
	"testing"
)

// FuzzLoad: any file and any one environment variable load or give an
// error; nothing panics or hangs.
// (It calls parse, Load after reading the file, so that no file is
// written per execution.)
// Seeds: the example config shipped with petrel and a few broken files.
func FuzzLoad(f *testing.F) {
	if example, err := os.ReadFile("../../petrel.example.toml"); err == nil {
		f.Add(example, "")
	}
	f.Add([]byte("[server]\nlisten = \"127.0.0.1:7447\"\n"), "PETREL_RELAY_MAX_LIMIT=500")
	f.Add([]byte("[relay]\nmax_limit = -1\n"), "")
	f.Add([]byte("[store]\npath = \"data\"\nbackend = \"postgres\"\n"), "PETREL_STORE_BACKEND=pebble")
	f.Add([]byte("[server\n"), "")
	f.Add([]byte("nosuchkey = 1\n"), "PETREL_NO_SUCH=1")
	f.Add([]byte(""), "PETREL_SERVER_MAX_CONNECTIONS_PER_IP=-1")
	f.Fuzz(func(t *testing.T, data []byte, env string) {
		var environ []string
		if env != "" {
			environ = []string{env}
		}
		// Nothing to check but that it returns: parse validates what it
		// accepts itself, and any input may be an error.
		_, _ = parse("/etc/petrel/petrel.toml", data, environ) // Load without the file
	})
}
