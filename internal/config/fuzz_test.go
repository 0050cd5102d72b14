package config

import (
	"os"
	"testing"
)

// FuzzLoad: any file and any one environment variable either load into a
// configuration that passes Validate, or give an error; nothing panics.
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
		c, err := parse("/etc/petrel/petrel.toml", data, environ) // Load without the file
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load accepted a config that Validate refuses: %v", err)
		}
		_ = c.Normalize()
	})
}
