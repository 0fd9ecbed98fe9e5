package core

// DefaultConfig returns the configuration a zero Config stands for: every
// default of the relay, written once (in Config's defaults), for callers
// that show or layer them (switchboard serve's flags and --print-config).
func DefaultConfig() Config {
	var c Config
	c.defaults()
	return c
}
