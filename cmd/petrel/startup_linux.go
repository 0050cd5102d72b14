package main

// Start-up maps the pages it is about to touch, and a client command
// runs with a 1 ms timer slack (internal/startup).
import "github.com/petrel-relay/petrel/internal/startup"

func init() { startupTopUp = startup.TopUp }
