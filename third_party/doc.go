// Package thirdparty holds no code. Its directory holds the forks of
// libraries petrel patches, each a module of its own used through a
// replace directive in petrel's go.mod, with a PATCHES.md that says how
// the fork differs from the release it was taken from. The package's test
// checks, for every such fork, that the difference is exactly what
// PATCHES.md shows: the release, less the files PATCHES.md lists as left
// out, with PATCHES.md's diffs applied in order, plus the tests it names,
// is the fork, byte for byte.
package thirdparty
