package hub

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/metrics"
)

// bodyFactor is how many times its size a request body is counted in the
// memory budget while its request runs: the bytes read, the decoded
// request, the message built from it and its stored encoding.
const bodyFactor = 4

// budgetWait is how long a request waits for room in the memory budget
// before it is refused: requests ahead of it finish in milliseconds.
const budgetWait = time.Second

// budgeted takes each request body's share of the memory budget before the
// body is read (its Content-Length, or maxBody when unknown, times
// bodyFactor), waiting up to budgetWait for room, and refuses the request
// with 507 over_budget and Retry-After when there is none: nothing is
// stored. The
// share is given back when the handler returns or, for a stream, when it
// first flushes (it has read its request by then).
func budgeted(b *core.Budget, maxBody int64, next http.Handler) http.Handler {
	if b == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		n := r.ContentLength
		if n < 0 || n > maxBody {
			n = maxBody
		}
		n = n*bodyFactor + 4096
		if !b.AcquireWait(r.Context(), n, budgetWait) {
			// The body is read and dropped a few KiB at a time (no memory
			// held), so the client, still sending, reads the answer
			// rather than a reset connection.
			_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBody))
			httperr.From(w, fmt.Errorf("a request body of %d bytes: %w", r.ContentLength, core.ErrOverloaded))
			return
		}
		release := sync.OnceFunc(func() { b.Release(n) })
		defer release()
		next.ServeHTTP(&budgetWriter{ResponseWriter: w, release: release}, r)
	})
}

// budgetWriter gives the request's share back at its first flush.
type budgetWriter struct {
	http.ResponseWriter
	release func()
}

func (w *budgetWriter) Flush() {
	w.release()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *budgetWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// gcPercent is the garbage collector's target heap growth SetMemoryLimit
// sets with the soft limit (see there).
const gcPercent = 400

// SetMemoryLimit sets the Go runtime's soft memory limit to the memory the
// process uses now plus three quarters of budget (the last quarter is for
// memory outside Go's heap), unless GOMEMLIMIT is set: the garbage
// collector then works harder as the hub's memory nears its budget,
// instead of letting garbage double the heap. Call it once the hub is
// built, with Options.MemoryBudget.
//
// With that limit in place it also lets the heap grow to gcPercent% over
// the live heap between collections (unless GOGC is set) rather than the
// runtime's 100%: the hub's live heap is small and most of what it
// allocates per message is garbage at once, so the default collected
// every few milliseconds under load, about 8% of the hub's CPU. The soft
// limit still bounds the heap: near it the collector runs as often as it
// must.
func SetMemoryLimit(budget int64) {
	if budget <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	var now int64
	if s[0].Value.Kind() == rtmetrics.KindUint64 && s[1].Value.Kind() == rtmetrics.KindUint64 {
		now = int64(s[0].Value.Uint64() - s[1].Value.Uint64())
	}
	debug.SetMemoryLimit(now + budget*3/4)
}

// registerBudget exports the budget as metrics.
func registerBudget(reg prometheus.Registerer, b *core.Budget) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "memory_budget_bytes",
			Help: "What the hub may hold in memory for clients (--memory-budget; 0: no budget)."},
			func() float64 { return float64(b.Limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: "memory_held_bytes",
			Help: "What the hub holds of its memory budget: request bodies being handled, cached and claimed messages."},
			func() float64 { return float64(b.Used()) }),
	)
}

// DefaultMemoryBudget is a quarter of the memory the process may use: the
// machine's (MemTotal), or its cgroup's limit when lower; 256 MiB when
// neither can be read.
func DefaultMemoryBudget() int64 {
	total := memTotal()
	if lim := cgroupLimit(); lim > 0 && (total == 0 || lim < total) {
		total = lim
	}
	if total <= 0 {
		return 256 << 20
	}
	return total / 4
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func cgroupLimit() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err == nil && v > 0 && v < 1<<60 { // "max" and v1's huge number mean none
			return v
		}
	}
	return 0
}

// ParseSize reads a byte size: a number with an optional unit (B, KiB,
// MiB, GiB, TiB, or KB, MB, GB, TB as powers of 1000), as in "512MiB".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit, such as 512MiB or 2GiB", s)
	}
	return int64(v * float64(mult)), nil
}
