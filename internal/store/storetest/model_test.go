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

// TestModelNoSearch runs the suite against the model without search, as
// against a store without a search index.
func TestModelNoSearch(t *testing.T) {
	Run(t, func(t *testing.T) store.Store {
		m := NewModel()
		m.NoSearch = true
		return m
	})
}
