package hub

import "github.com/switchboard-hub/switchboard/internal/core"

// Defaults of Options, written once: New applies the same values to zero
// fields, and switchboard serve shows them as its flags' defaults.
const (
	DefaultAddr    = "127.0.0.1:8080"
	DefaultDataDir = "./switchboard-data"
	DefaultMaxBody = 1 << 20
	DefaultSync    = "full"
)

// Defaults returns the options a hub runs with when none are given: the
// hub's own defaults and the relay's (core.DefaultConfig), with the relay's
// host left empty (it defaults to the listen host).
func Defaults() Options {
	relay := core.DefaultConfig()
	relay.Host = ""
	return Options{Addr: DefaultAddr, DataDir: DefaultDataDir, MaxBody: DefaultMaxBody, Sync: DefaultSync,
		BodyTimeout: DefaultBodyTimeout, Relay: relay}
}
