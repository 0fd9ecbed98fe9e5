// Command bench-charts measures a relay at several sender concurrencies,
// for each way the receiver can take its messages (push to a callback, and
// Switchboard's live stream with batched acknowledgements), with
// `switchboard bench --json` and draws the results as SVG charts
// (throughput, and send / end-to-end latency percentiles, against
// concurrency; and p99 latency against an open-loop offered load) into
// docs/bench/.
//
//	go run ./scripts/bench-charts                  # builds the binary, starts a fresh hub per level
//	go run ./scripts/bench-charts -hub URL -token T  # measures a running relay instead
//
// With no -hub it builds ./cmd/switchboard, and for each concurrency level
// starts `switchboard serve` with auth on (the per-agent rate limit off)
// and an empty data directory (so no level inherits the previous one's
// data), runs the benchmark against it and stops it. Then it holds each -rates load with -rate-senders senders
// open-loop (`switchboard bench --rate`: a fixed schedule, latency counted
// from each message's scheduled time). It writes docs/bench/results.json,
// throughput.svg, latency.svg and load.svg, and prints Markdown tables for
// BENCHMARKS.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bench"
)

// Run is one measured concurrency level, or (Rate set) one open-loop load.
type Run struct {
	Senders int          `json:"senders"`
	Receive string       `json:"receive"`
	Rate    float64      `json:"rate,omitempty"` // open-loop messages/s; 0: closed-loop
	Result  bench.Result `json:"result"`
}

// mode is a run's receive mode (results from before modes were recorded
// are push).
func (r Run) mode() string {
	if r.Receive == "" {
		return bench.ReceivePush
	}
	return r.Receive
}

// Report is docs/bench/results.json.
type Report struct {
	Date     time.Time `json:"date"`
	Target   string    `json:"target"`
	Duration string    `json:"duration_per_level"`
	Payload  int       `json:"payload_bytes"`
	GoVer    string    `json:"go_version"`
	CPUs     int       `json:"cpus"`
	LoadAvg  string    `json:"load_average_before"`
	Runs     []Run     `json:"runs"`
}

func main() {
	var (
		hub      = flag.String("hub", "", "relay base URL to measure (default: start a fresh local hub per level)")
		token    = flag.String("token", "", "bearer token for -hub")
		levels   = flag.String("senders", "1,8,16,32,64,128", "comma-separated sender concurrencies")
		receive  = flag.String("receive", "push,stream", "comma-separated receive modes to measure: push (callback), stream (/atp/stream with batched acks)")
		duration = flag.Duration("duration", 5*time.Second, "how long each level sends")
		payload  = flag.Int("payload", 64, "payload text size in bytes")
		out      = flag.String("out", "docs/bench", "output directory")
		bin      = flag.String("bin", "", "switchboard binary (default: build ./cmd/switchboard)")
		redraw   = flag.Bool("redraw", false, "only redraw the charts from OUT/results.json (no measuring)")
		rates    = flag.String("rates", "1000,2000,3000,4000,5000", "comma-separated open-loop loads in messages/s (empty: none)")
		rateN    = flag.Int("rate-senders", 64, "senders for the open-loop loads")
		ids      = flag.String("ids", bench.IDsOrdered, "how the senders make message ids (switchboard bench --ids): ordered, random or sender")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *redraw {
		if err := redrawCharts(*out); err != nil {
			fmt.Fprintln(os.Stderr, "bench-charts:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, *hub, *token, *levels, *receive, *rates, *rateN, *duration, *payload, *ids, *out, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "bench-charts:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, hubURL, token, levels, receive, rates string, rateSenders int, d time.Duration, payload int, ids, out, bin string) error {
	var modes []string
	for _, f := range strings.Split(receive, ",") {
		switch f = strings.TrimSpace(f); f {
		case bench.ReceivePush, bench.ReceiveStream:
			modes = append(modes, f)
		default:
			return fmt.Errorf("-receive: %q is not push or stream", f)
		}
	}
	var senders []int
	for _, f := range strings.Split(levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-senders: %q is not a positive integer", f)
		}
		senders = append(senders, n)
	}
	var loads []float64
	for _, f := range strings.Split(rates, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) {
			return fmt.Errorf("-rates: %q is not a positive number", f)
		}
		loads = append(loads, v)
	}
	if len(loads) > 0 && rateSenders < 1 {
		return fmt.Errorf("-rate-senders: %d is not a positive integer", rateSenders)
	}
	tmp, err := os.MkdirTemp("", "bench-charts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "switchboard")
		fmt.Fprintln(os.Stderr, "building ./cmd/switchboard …")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/switchboard")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	rep := Report{Date: time.Now().UTC(), Target: hubURL, Duration: d.String(), Payload: payload, GoVer: runtime.Version(),
		CPUs: runtime.NumCPU(), LoadAvg: strings.TrimSpace(string(load))}
	if hubURL == "" {
		rep.Target = "fresh local `switchboard serve` per level (auth on, per-agent rate limit off, embedded SQLite, fsync on)"
	}
	measure := func(mode string, n int, rate float64) error {
		target, tok, stopHub := hubURL, token, func() {}
		if hubURL == "" {
			target, tok, stopHub, err = startHub(ctx, bin, filepath.Join(tmp, fmt.Sprintf("data-%s-%d-%.0f", mode, n, rate)))
			if err != nil {
				return err
			}
		}
		if rate > 0 {
			fmt.Fprintf(os.Stderr, "%-6s senders %3d at %5.0f/s: ", mode, n, rate)
		} else {
			fmt.Fprintf(os.Stderr, "%-6s senders %3d: ", mode, n)
		}
		res, err := benchOnce(ctx, bin, target, tok, mode, n, rate, d, payload, ids)
		stopHub()
		if err != nil {
			return fmt.Errorf("%s, senders %d, rate %.0f: %w", mode, n, rate, err)
		}
		fmt.Fprintf(os.Stderr, "%.0f accepted/s, %.0f delivered/s, send p50 %.2fms p99 %.2fms\n", res.AcceptedPerSec, res.DeliveredPerSec, ms(res.SendP50), ms(res.SendP99))
		rep.Runs = append(rep.Runs, Run{Senders: n, Receive: mode, Rate: rate, Result: res})
		return nil
	}
	for _, mode := range modes {
		for _, n := range senders {
			if err := measure(mode, n, 0); err != nil {
				return err
			}
		}
	}
	for _, mode := range modes {
		for _, r := range loads {
			if err := measure(mode, rateSenders, r); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return writeCharts(out, rep)
}

// redrawCharts redraws the charts and the table from out/results.json.
func redrawCharts(out string) error {
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	return writeCharts(out, rep)
}

func writeCharts(out string, rep Report) error {
	if err := os.WriteFile(filepath.Join(out, "throughput.svg"), throughputChart(rep), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "latency.svg"), latencyChart(rep), 0o644); err != nil {
		return err
	}
	if open := openLoop(rep); len(open.Runs) > 0 {
		if err := os.WriteFile(filepath.Join(out, "load.svg"), loadChart(open), 0o644); err != nil {
			return err
		}
	}
	fmt.Print(markdownTable(rep))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// startHub starts `switchboard serve` on a free loopback port with auth on
// and returns its URL, admin token and a stop function.
func startHub(ctx context.Context, bin, data string) (string, string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "sba_bench-charts-admin-token"
	// The per-agent rate limit (1,000 requests/s by default) is off: one
	// closed-loop sender goes faster than that, and the charts are about
	// what the hub can carry, not about the limit.
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", addr, "--data", data, "--admin-token", token,
		"--allow-loopback-callbacks", "--log-level", "warn", "--rate-limit", "-1")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return "", "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	base := "http://" + addr
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return base, token, stop, nil
			}
		}
	}
	stop()
	return "", "", nil, fmt.Errorf("hub did not become ready: %s", logs.String())
}

func benchOnce(ctx context.Context, bin, hubURL, token, mode string, senders int, rate float64, d time.Duration, payload int, ids string) (bench.Result, error) {
	args := []string{"bench", "--hub", hubURL, "--senders", strconv.Itoa(senders), "--duration", d.String(),
		"--payload", strconv.Itoa(payload), "--receive", mode, "--ids", ids, "--json", "--quiet"}
	if rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(rate, 'f', -1, 64))
	}
	if token != "" {
		args = append(args, "--token", token)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return bench.Result{}, fmt.Errorf("switchboard bench: %w: %s", err, stderr.String())
	}
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return bench.Result{}, fmt.Errorf("switchboard bench --json output: %w", err)
	}
	if res.Accepted == 0 {
		return res, errors.New("nothing was accepted")
	}
	return res, nil
}

func markdownTable(rep Report) string {
	var b strings.Builder
	b.WriteString("| receive | senders | accepted/s | delivered/s | send p50 | send p90 | send p99 | end-to-end p50 | end-to-end p99 | errors |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range closedLoop(rep).Runs {
		x := r.Result
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d |\n", r.mode(), r.Senders, x.AcceptedPerSec,
			x.DeliveredPerSec, ms(x.SendP50), ms(x.SendP90), ms(x.SendP99), ms(x.E2EP50), ms(x.E2EP99), x.Errors)
	}
	if open := openLoop(rep); len(open.Runs) > 0 {
		b.WriteString("\n| receive | senders | offered/s | accepted/s | delivered/s | send p50 | send p90 | send p99 | end-to-end p50 | end-to-end p99 | errors |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range open.Runs {
			x := r.Result
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d |\n", r.mode(), r.Senders, r.Rate, x.AcceptedPerSec,
				x.DeliveredPerSec, ms(x.SendP50), ms(x.SendP90), ms(x.SendP99), ms(x.E2EP50), ms(x.E2EP99), x.Errors)
		}
	}
	return b.String()
}

// closedLoop and openLoop split a report's runs by how they loaded the hub.
func closedLoop(rep Report) Report { return filterRuns(rep, func(r Run) bool { return r.Rate == 0 }) }
func openLoop(rep Report) Report   { return filterRuns(rep, func(r Run) bool { return r.Rate > 0 }) }

func filterRuns(rep Report, keep func(Run) bool) Report {
	out := rep
	out.Runs = nil
	for _, r := range rep.Runs {
		if keep(r) {
			out.Runs = append(out.Runs, r)
		}
	}
	return out
}

// ---- SVG ----

// series is one line of a chart.
type series struct {
	name   string
	color  string
	dashed bool
	values []float64
}

// modes returns the receive modes in rep, in order of first appearance,
// and the sender levels (those of the first mode).
func modes(rep Report) ([]string, []int) {
	var list []string
	var levels []int
	for _, r := range rep.Runs {
		if !slices.Contains(list, r.mode()) {
			list = append(list, r.mode())
		}
		if r.mode() == rep.Runs[0].mode() {
			levels = append(levels, r.Senders)
		}
	}
	return list, levels
}

// values picks one figure of each run of mode, in level order.
func values(rep Report, mode string, f func(bench.Result) float64) []float64 {
	var out []float64
	for _, r := range rep.Runs {
		if r.mode() == mode {
			out = append(out, f(r.Result))
		}
	}
	return out
}

// modeColor is each receive mode's colour in the charts.
var modeColor = map[string]string{bench.ReceivePush: "#2f5bea", bench.ReceiveStream: "#1f9d55"}

func throughputChart(rep Report) []byte {
	rep = closedLoop(rep)
	list, levels := modes(rep)
	var ss []series
	for _, m := range list {
		ss = append(ss,
			series{name: m + ": accepted/s (durable)", color: modeColor[m], values: values(rep, m, func(r bench.Result) float64 { return r.AcceptedPerSec })},
			series{name: m + ": delivered/s (acknowledged)", color: modeColor[m], dashed: true, values: values(rep, m, func(r bench.Result) float64 { return r.DeliveredPerSec })})
	}
	return chart("Throughput against concurrency", "messages / second", "concurrent senders", rep, levels, ss)
}

func latencyChart(rep Report) []byte {
	rep = closedLoop(rep)
	list, levels := modes(rep)
	var ss []series
	for _, m := range list {
		ss = append(ss,
			series{name: m + ": send p99 (until durable)", color: modeColor[m], values: values(rep, m, func(r bench.Result) float64 { return ms(r.SendP99) })},
			series{name: m + ": end-to-end p99 (send → receiver)", color: modeColor[m], dashed: true, values: values(rep, m, func(r bench.Result) float64 { return ms(r.E2EP99) })})
	}
	return chart("p99 latency against concurrency", "milliseconds", "concurrent senders", rep, levels, ss)
}

// loadChart draws p50 and p99 send latency against the open-loop offered
// load (the x positions are the loads, evenly spaced).
func loadChart(rep Report) []byte {
	list, _ := modes(rep)
	var loads []int
	for _, r := range rep.Runs {
		if r.mode() == list[0] {
			loads = append(loads, int(r.Rate))
		}
	}
	var ss []series
	for _, m := range list {
		ss = append(ss,
			series{name: m + ": send p99 (from the scheduled time)", color: modeColor[m], values: values(rep, m, func(r bench.Result) float64 { return ms(r.SendP99) })},
			series{name: m + ": send p50", color: modeColor[m], dashed: true, values: values(rep, m, func(r bench.Result) float64 { return ms(r.SendP50) })})
	}
	title := fmt.Sprintf("Send latency against offered load (%d senders, open-loop)", rep.Runs[0].Senders)
	return drawChart(title, "milliseconds (log scale)", "offered messages / second", rep, loads, ss, true)
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten and returns it
// with the tick step.
func niceMax(v float64) (max, step float64) {
	if v <= 0 {
		return 1, 0.2
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			max = m * p
			break
		}
	}
	step = max / 5
	return max, step
}

func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}

func fmtTick(v float64) string {
	switch {
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// chart draws lines over categorical x positions (the sender counts,
// evenly spaced: they double from level to level).
func chart(title, yLabel, xLabel string, rep Report, levels []int, ss []series) []byte {
	return drawChart(title, yLabel, xLabel, rep, levels, ss, false)
}

// drawChart is chart, with a logarithmic y axis (powers of ten) if logY.
func drawChart(title, yLabel, xLabel string, rep Report, levels []int, ss []series, logY bool) []byte {
	const W, H = 760, 400
	const left, right, top, bottom = 80, 24, 56, 110
	pw, ph := float64(W-left-right), float64(H-top-bottom)
	var vmax float64
	for _, s := range ss {
		for _, v := range s.values {
			vmax = math.Max(vmax, v)
		}
	}
	ymax, step := niceMax(vmax * 1.05)
	ticks := func(yield func(float64) bool) {
		for v := 0.0; v <= ymax+step/2; v += step {
			if !yield(v) {
				return
			}
		}
	}
	var y func(v float64) float64
	if logY {
		// From 1 (or the smallest power of ten below every value) to the
		// power of ten above the largest.
		lo, hi := 0.0, math.Ceil(math.Log10(math.Max(vmax, 1)))
		for _, s := range ss {
			for _, v := range s.values {
				if v > 0 {
					lo = math.Min(lo, math.Floor(math.Log10(v)))
				}
			}
		}
		if hi <= lo {
			hi = lo + 1
		}
		y = func(v float64) float64 {
			v = math.Max(v, math.Pow(10, lo))
			return top + ph - (math.Log10(v)-lo)/(hi-lo)*ph
		}
		ticks = func(yield func(float64) bool) {
			for e := lo; e <= hi; e++ {
				if !yield(math.Pow(10, e)) {
					return
				}
			}
		}
	} else {
		y = func(v float64) float64 { return top + ph - v/ymax*ph }
	}
	n := len(levels)
	x := func(i int) float64 {
		if n == 1 {
			return left + pw/2
		}
		return left + float64(i)*pw/float64(n-1)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="16" font-weight="600" fill="#1d2330">%s</text>`+"\n", left, esc(title))
	fmt.Fprintf(&b, `<text x="%d" y="46" fill="#6b7385">%s · %s per level · %d CPUs · %s</text>`+"\n", left,
		esc(rep.Date.Format("2006-01-02")), esc(rep.Duration), rep.CPUs, esc(rep.GoVer))
	for v := range ticks {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e2e5ea"/>`+"\n", left, W-right, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#6b7385">%s</text>`+"\n", left-8, y(v)+4, fmtTick(v))
	}
	fmt.Fprintf(&b, `<text transform="translate(20 %.1f) rotate(-90)" text-anchor="middle" fill="#1d2330">%s</text>`+"\n", top+ph/2, esc(yLabel))
	for i, l := range levels {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#9aa1b1"/>`+"\n", x(i), x(i), top+ph, top+ph+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#1d2330">%d</text>`+"\n", x(i), top+ph+20, l)
	}
	if logY {
		// The latency target of the foundation issue: p99 under 10 ms.
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#d64545" stroke-dasharray="2 3"/>`+"\n", left, W-right, y(10), y(10))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#d64545">10 ms</text>`+"\n", W-right, y(10)-4)
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#9aa1b1"/>`+"\n", left, W-right, top+ph, top+ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#1d2330">%s</text>`+"\n", left+pw/2, top+ph+40, esc(xLabel))
	for _, s := range ss {
		var pts []string
		for i, v := range s.values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		for i, v := range s.values {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s at %d %s: %s</title></circle>`+"\n",
				x(i), y(v), s.color, esc(s.name), levels[i], esc(xLabel), strconv.FormatFloat(v, 'f', 2, 64))
		}
	}
	ly := float64(top) + ph + 62
	for i, s := range ss {
		lx := float64(left) + float64(i%2)*340
		yy := ly + float64(i/2)*20
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, lx+28, yy-4, yy-4, s.color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#1d2330">%s</text>`+"\n", lx+36, yy, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
