//go:build !race

package server

import "github.com/lesismal/nbio"

// raceHandoff is a no-op without the race detector (see race.go).
func raceHandoff(*nbio.Engine) {}
