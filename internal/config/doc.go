// Package config is petrel's configuration file: one TOML document whose
// sections map onto the packages' own Config structs, with environment
// overrides (PETREL_<SECTION>_<KEY>) applied on top. The zero Config runs
// a relay on 127.0.0.1:7447 with the embedded store in ./petrel-data.
package config
