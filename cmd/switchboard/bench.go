package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
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
	fs.Float64Var(&c.Rate, "rate", 0, "open-loop: send this many messages a second in all, on a fixed schedule, and count latency from each message's scheduled time (0: closed-loop, each sender sends again as soon as it is answered)")
	fs.IntVar(&c.Messages, "messages", 0, "stop after this many messages (0: run for --duration)")
	fs.IntVar(&c.Payload, "payload", 64, "payload text size in bytes")
	fs.DurationVar(&c.TTL, "ttl", time.Minute, "message TTL")
	fs.DurationVar(&c.Drain, "drain", 30*time.Second, "how long to wait for outstanding deliveries")
	fs.IntVar(&c.SenderAgents, "sender-agents", 0, "sender agents the senders speak as (sender i as agent i mod N; 0: one per sender): N × --receivers lanes carry the load; 1 with --receivers 1 puts every message in one (sender, receiver) lane")
	fs.IntVar(&c.Receivers, "receivers", 1, "receivers to register; each sender sends to them in turn (with --receive stream, each holds its own stream)")
	fs.StringVar(&c.Receive, "receive", bench.ReceivePush, "how the receiver gets messages: push (a local callback URL; works with any ATP relay) or stream (Switchboard's /atp/stream with batched /atp/ack)")
	fs.StringVar(&c.IDs, "ids", bench.IDsOrdered, "how senders make message ids: ordered (UUIDv7s, growing with time, as the Go client makes them), random (128 random bits, like UUIDv4s) or sender (the sender's number and a count)")
	hubs := fs.String("hubs", "", "comma-separated base URLs of several hub instances sharing one store: senders are spread round-robin across them, the receiver registers on the first (overrides --hub)")
	quiet := fs.Bool("quiet", false, "no progress bar (there is none anyway unless standard error is a terminal)")
	cpuprofile := fs.String("cpuprofile", "", "write the load generator's own CPU profile to this file (for go tool pprof)")
	fs.Usage = func() {
		fmt.Fprintln(s.err, `Usage: switchboard bench [flags]

Registers a receiver (--receivers N: N of them) with a local callback (or,
with --receive stream, one that reads /atp/stream and acknowledges in
batches), runs --senders concurrent senders against --hub's /atp/send for
--duration, waits for the deliveries, and prints accepted and delivered
throughput and send / end-to-end latency percentiles. By default the senders
are closed-loop (each sends again as soon as it is answered: the hub's top
speed); --rate N holds a steady N messages/s instead and counts latency from
when each message was due (latency at a load). With --hubs URL,URL,... the
senders are spread over several instances of one hub (for example on one
PostgreSQL database) to measure scale-out. It also prints the CPU time used
per delivered message by the load generator and, when the hub's /metrics
answers (the admin token, or --metrics-public), by the hub (summed over the
--hubs URLs). Each sender registers as an agent and sends with the
credential the hub issues it, as agents do; a hub that issues none (--dev,
or another relay) gets --token from every sender. Every agent the run
registers is deregistered when it ends. The progress bar is drawn on
standard error only when that is a terminal.
Works against any ATP-compatible relay. Use --json for machine-readable output.

Flags:`)
		fs.PrintDefaults()
	}
	if _, code, ok := parseArgs(fs, args, 0); !ok {
		return code
	}
	base, token, err := h.resolve()
	if err != nil {
		return usageError(s, "bench", err)
	}
	c.Hub = base
	if *hubs != "" {
		for _, u := range strings.Split(*hubs, ",") {
			if u = strings.TrimSpace(u); u == "" {
				fmt.Fprintln(s.err, "bench: --hubs has an empty URL")
				return exitUsage
			}
			c.Hubs = append(c.Hubs, u)
		}
	}
	c.Token = token
	// The progress bar redraws one line with carriage returns: only on a
	// terminal, never into a log file or a pipe.
	if !*quiet && !h.json() && isTerminal(s.err) {
		c.Progress = func(line string) { fmt.Fprintf(s.err, "\r%s", line) }
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(s.err, "bench: --cpuprofile: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(s.err, "bench: --cpuprofile: %v\n", err)
			return exitFailure
		}
	}
	res, err := bench.Run(ctx, c)
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if c.Progress != nil {
		fmt.Fprintln(s.err)
	}
	if err != nil {
		fmt.Fprintf(s.err, "bench: %v\n", err)
		return exitUnavail
	}
	if h.json() {
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

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
