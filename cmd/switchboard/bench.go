package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bench"
)

func init() { register("bench", "load-test an ATP relay and print throughput and latency", runBench) }

func runBench(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(s.err)
	var c bench.Config
	var h hubFlags
	h.add(fs)
	fs.IntVar(&c.Senders, "senders", 64, "concurrent senders")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to send")
	fs.IntVar(&c.Messages, "messages", 0, "stop after this many messages (0: run for --duration)")
	fs.IntVar(&c.Payload, "payload", 64, "payload text size in bytes")
	fs.DurationVar(&c.TTL, "ttl", time.Minute, "message TTL")
	fs.DurationVar(&c.Drain, "drain", 30*time.Second, "how long to wait for outstanding deliveries")
	quiet := fs.Bool("quiet", false, "no progress bar")
	fs.Usage = func() {
		fmt.Fprintln(s.err, `Usage: switchboard bench [flags]

Registers a receiver with a local callback, runs --senders concurrent senders
against --hub's /atp/send for --duration, waits for the deliveries, and prints
accepted and delivered throughput and send / end-to-end latency percentiles.
Works against any ATP-compatible relay. Use --json for machine-readable output.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	c.Hub = h.hub
	c.Token = h.client().Token()
	if !*quiet && !h.json {
		c.Progress = func(line string) { fmt.Fprintf(s.err, "\r%s", line) }
	}
	res, err := bench.Run(ctx, c)
	if c.Progress != nil {
		fmt.Fprintln(s.err)
	}
	if err != nil {
		fmt.Fprintf(s.err, "bench: %v\n", err)
		return exitUnavail
	}
	if h.json {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(s.out, string(b))
	} else {
		fmt.Fprintln(s.out, res.String())
	}
	if res.Accepted == 0 {
		return exitFailure
	}
	return exitOK
}
