// Package store defines the contract between the relay and its event store:
// the Store interface, its query and result types, and its sentinel errors.
// Backends live in sub-packages (pebble, the embedded store, is the only
// one so far) and must all pass the conformance suite in storetest,
// which checks them against a naive in-memory model of this contract.
package store
