package stream

import (
	"errors"
	"os"
	"testing"
)

// FuzzRouterConfig: any file either loads and yields streams, or gives an
// error that matches ErrRouterConfig; nothing panics. Seeds: the example file shipped with petrel and broken ones.
func FuzzRouterConfig(f *testing.F) {
	if example, err := os.ReadFile("../../deploy/router.example.toml"); err == nil {
		f.Add(example)
	}
	f.Add([]byte("[groups.a]\ndir = \"down\"\nurls = [\"ws://127.0.0.1:2\"]\nfilter = { kinds = [1], \"#t\" = [\"x\"] }\n"))
	f.Add([]byte("catchup = \"0s\"\n[groups.a]\ndir = \"both\"\nurls = [\"ws://127.0.0.1:2\", \"ws://127.0.0.1:2\"]\n"))
	f.Add([]byte("[groups.a]\ndir = \"sideways\"\nurls = [\"ws://x\"]\n"))
	f.Add([]byte("[groups.a]\ndir = \"up\"\nurls = [\"ws://x\"]\nfilter = { limit = -1, since = \"now\" }\n"))
	f.Add([]byte("window = -3\n[groups.a]\ndir = \"up\"\nurls = [\"ws://x\"]\ncatchup = \"-1h\"\n"))
	f.Add([]byte("[groups]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseRouterConfig("router.toml", data) // LoadRouterConfig without the file
		if err != nil {
			if !errors.Is(err, ErrRouterConfig) {
				t.Fatalf("parseRouterConfig: %v, which is not an ErrRouterConfig", err)
			}
			return
		}
		// Streams checks each stream's options as New does.
		if _, err := c.Streams("ws://127.0.0.1:1", nil, nil); err != nil && !errors.Is(err, ErrRouterConfig) {
			t.Fatalf("Streams: %v, which is not an ErrRouterConfig", err)
		}
	})
}
