package main

// Start-up maps the pages it is about to touch (internal/prefault).
import _ "github.com/petrel-relay/petrel/internal/prefault"
