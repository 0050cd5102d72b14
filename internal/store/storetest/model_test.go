package storetest

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/store"
)

// TestModel runs the suite against the model itself: it checks the suite's
// expectations as much as the model.
func TestModel(t *testing.T) {
	Run(t, func(t *testing.T) store.Store { return NewModel() })
}
