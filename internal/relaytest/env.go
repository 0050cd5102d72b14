package relaytest

import (
	"io"
	"os"
)

func getenv(k string) string { return os.Getenv(k) }
func stderr() io.Writer      { return os.Stderr }
