// Command ha-failover tests hubs on a PostgreSQL primary with a streaming
// replica through a failover: it starts the primary and the replica (initdb,
// pg_basebackup; synchronous or asynchronous replication), two hubs on a
// multi-host connection string with target_session_attrs=read-write, a push
// receiver, and senders spread over the hubs that retry a failed send with
// the same message id on the other hub. Under load it kills the primary
// (SIGKILL to the postmaster) and promotes the replica; the hubs reconnect
// to it by themselves. It then checks every acknowledged message: lost
// (acknowledged, but no receipt on the new primary), delivered, duplicate
// deliveries, and the stall (the longest time no send was acknowledged).
// It needs root (PostgreSQL runs as the postgres user) and PostgreSQL's
// binaries (scripts/postgres-test-server.sh installs them on Debian).
//
//	go run ./scripts/ha-failover -sync=true          # synchronous replication
//	go run ./scripts/ha-failover -sync=false         # asynchronous
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/scripts/internal/hubbin"
)

var (
	syncRep  = flag.Bool("sync", true, "synchronous replication (synchronous_standby_names names the replica)")
	before   = flag.Duration("before", 4*time.Second, "load before the primary is killed")
	after    = flag.Duration("after", 8*time.Second, "load after the primary is killed")
	promote  = flag.Duration("promote-after", time.Second, "how long after the kill the replica is promoted (an operator's or a failover manager's reaction time)")
	senders  = flag.Int("senders", 16, "concurrent senders")
	primPort = flag.Int("primary-port", 25522, "primary's port")
	repPort  = flag.Int("replica-port", 25512, "replica's port")
	bin      = hubbin.BinFlag()
	keep     = flag.Bool("keep", false, "keep the work directory")
)

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if os.Geteuid() != 0 {
		fatal("run as root: PostgreSQL runs as the postgres user")
	}
	work, err := os.MkdirTemp("", "switchboard-ha-")
	must(err)
	must(os.Chmod(work, 0o755))
	if !*keep {
		cleanups = append(cleanups, func() { os.RemoveAll(work) })
	}
	pgbin := pgBin()
	*bin, err = hubbin.Build(*bin, work)
	must(err)
	prim, rep := filepath.Join(work, "primary"), filepath.Join(work, "replica")
	defer runCleanups()

	// The primary: replication on, and (for -sync) commits wait for the
	// replica to flush them.
	must(os.MkdirAll(prim, 0o700))
	chown(prim)
	asPostgres(pgbin, "initdb", "-D", prim, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nmax_connections = 300\nwal_level = replica\nmax_wal_senders = 5\nfsync = on\nsynchronous_commit = on\nunix_socket_directories = '%s'\n", *primPort, prim)
	if *syncRep {
		conf += "synchronous_standby_names = 'replica1'\n"
	}
	appendFile(filepath.Join(prim, "postgresql.conf"), conf)
	appendFile(filepath.Join(prim, "pg_hba.conf"), "host replication all 127.0.0.1/32 trust\n")
	asPostgres(pgbin, "pg_ctl", "-D", prim, "-l", filepath.Join(prim, "log"), "-w", "start")
	cleanups = append(cleanups, func() { stopPG(pgbin, prim) })

	// The replica: a base backup streaming from the primary.
	must(os.MkdirAll(rep, 0o700))
	chown(rep)
	// -R writes primary_conninfo from this connection string, with the
	// application name synchronous_standby_names expects.
	asPostgres(pgbin, "pg_basebackup", "-d", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=replica1", *primPort),
		"-D", rep, "-R", "-X", "stream")
	appendFile(filepath.Join(rep, "postgresql.conf"), fmt.Sprintf("port = %d\nunix_socket_directories = '%s'\n", *repPort, rep))
	asPostgres(pgbin, "pg_ctl", "-D", rep, "-l", filepath.Join(rep, "log"), "-w", "start")
	cleanups = append(cleanups, func() { stopPG(pgbin, rep) })
	psql(pgbin, *primPort, "postgres", "CREATE DATABASE ha")
	waitReplicated(pgbin)

	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/ha?sslmode=disable&target_session_attrs=read-write&connect_timeout=2", *primPort, *repPort)
	if out, err := exec.Command(*bin, "migrate", "--store", url).CombinedOutput(); err != nil {
		fatalf("migrate: %v\n%s", err, out)
	}

	// The receiver: counts every delivery (duplicates included) and
	// answers through the Go client's deduplicating handler.
	var mu sync.Mutex
	seen := map[string]int{}
	var raw atomic.Int64
	handler := client.CallbackHandler(func(ctx context.Context, env *client.Envelope) (client.Reply, error) {
		mu.Lock()
		seen[env.MessageID]++
		mu.Unlock()
		return client.Reply{}, nil
	}, client.CallbackOptions{})
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	go http.Serve(rln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { raw.Add(1); handler.ServeHTTP(w, r) }))

	// Two hubs on the multi-host URL.
	var hubs []string
	for i := range 2 {
		addr, err := hubbin.FreeAddr()
		must(err)
		data := filepath.Join(work, fmt.Sprintf("hub%d", i))
		logf, err := os.Create(filepath.Join(work, fmt.Sprintf("hub%d.log", i)))
		must(err)
		h, err := hubbin.StartLogging(logf, *bin, addr, "--store", url, "--data", data, "--rate-limit", "-1",
			"--claim-lease", "3s", "--deliver-timeout", "2s", "--log-level", "warn")
		must(err)
		cleanups = append(cleanups, h.Stop)
		hubs = append(hubs, h.Base)
		must(h.WaitReady(100*time.Millisecond, 30*time.Second))
	}
	ctx := context.Background()
	c0 := client.New(hubs[0])
	if _, err := c0.Register(ctx, client.Registration{AgentID: "worker", CallbackURL: "http://" + rln.Addr().String(), LeaseSeconds: 3600}); err != nil {
		fatal(err)
	}

	// Senders: sender s posts to hub s%2 and, when a send fails, retries
	// the same message id on the other hub until it is acknowledged.
	var acked sync.Map // id → time acknowledged
	var sendErrs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for s := range *senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := []*client.Client{client.New(hubs[s%2], client.WithRetries(0)), client.New(hubs[(s+1)%2], client.WithRetries(0))}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("s%02d-%06d", s, i)
				for try := 0; ; try++ {
					sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := cs[try%2].Send(sctx, client.Message{MessageID: id, Sender: fmt.Sprintf("sender%02d", s), Receiver: "worker",
						Type: "t", TTL: 10 * time.Minute, Payload: map[string]any{"n": i}})
					cancel()
					if err == nil {
						acked.Store(id, time.Now().UnixNano())
						break
					}
					sendErrs.Add(1)
					select {
					case <-stop:
						return // never acknowledged: not counted
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		}()
	}
	time.Sleep(*before)
	count := func() (n int) {
		acked.Range(func(any, any) bool { n++; return true })
		return
	}
	ackedBefore := count()
	pm := postmasterPID(prim)
	log.Printf("killing the primary (postmaster %d) after %d acknowledged messages", pm, ackedBefore)
	killedAt := time.Now()
	must(syscall.Kill(pm, syscall.SIGKILL))
	time.Sleep(*promote)
	log.Printf("promoting the replica")
	asPostgres(pgbin, "pg_ctl", "-D", rep, "-w", "promote")
	if *syncRep {
		// The replica's configuration is a copy of the primary's, so the new
		// primary would wait for a synchronous standby named replica1 (itself)
		// forever. An operator points it at the next standby, or (with none,
		// as here) clears it; until then every commit waits.
		psql(pgbin, *repPort, "postgres", "ALTER SYSTEM SET synchronous_standby_names = ''")
		psql(pgbin, *repPort, "postgres", "SELECT pg_reload_conf()")
	}
	promotedAt := time.Now()
	time.Sleep(*after)
	stopAt := time.Now()
	close(stop)
	wg.Wait()
	total := count()

	// Every acknowledged message must be on the new primary and reach the
	// receiver.
	var ids []string
	acked.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	slices.Sort(ids)
	deadline := time.Now().Add(90 * time.Second)
	for {
		mu.Lock()
		got := 0
		for _, id := range ids {
			if seen[id] > 0 {
				got++
			}
		}
		mu.Unlock()
		if got == len(ids) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	lost, notDelivered, dups := 0, 0, 0
	var lostIDs []string
	for _, id := range ids {
		code := receiptStatus(hubs[0], id)
		if code == http.StatusNotFound {
			lost++
			if len(lostIDs) < 10 {
				lostIDs = append(lostIDs, id)
			}
		}
		mu.Lock()
		n := seen[id]
		mu.Unlock()
		if n == 0 {
			notDelivered++
		}
		if n > 1 {
			dups += n - 1
		}
	}
	var times []int64
	acked.Range(func(_, v any) bool { times = append(times, v.(int64)); return true })
	slices.Sort(times)
	var stall time.Duration
	var stallAt time.Time
	for i := 1; i < len(times); i++ {
		if d := time.Duration(times[i] - times[i-1]); d > stall {
			stall, stallAt = d, time.Unix(0, times[i-1])
		}
	}
	if end := time.Duration(stopAt.UnixNano() - times[len(times)-1]); end > stall {
		stall, stallAt = end, time.Unix(0, times[len(times)-1])
	}
	firstAfter := time.Duration(0)
	acked.Range(func(_, v any) bool {
		t := time.Unix(0, v.(int64))
		if t.After(killedAt) && (firstAfter == 0 || t.Sub(killedAt) < firstAfter) {
			firstAfter = t.Sub(killedAt)
		}
		return true
	})
	mode := "asynchronous"
	if *syncRep {
		mode = "synchronous"
	}
	fmt.Printf("replication %s: %d senders over 2 hubs; primary killed at %.1fs after %d acknowledged, replica promoted %v later\n",
		mode, *senders, killedAt.Sub(start).Seconds(), ackedBefore, promotedAt.Sub(killedAt).Round(time.Millisecond))
	mu.Lock()
	distinct := len(seen)
	mu.Unlock()
	fmt.Printf("acknowledged %d, lost %d %v, not delivered %d; deliveries %d of %d distinct messages: %d redeliveries (messages in flight at the kill, delivered again and absorbed by the client's deduplication), %d handled twice; failed send attempts (retried) %d\n",
		total, lost, lostIDs, notDelivered, raw.Load(), distinct, raw.Load()-int64(distinct), dups, sendErrs.Load())
	fmt.Printf("stall: the longest time without an acknowledged send was %v, from %.2fs after the kill (the last acknowledgement before it may be of a send begun before the kill); first acknowledgement after the promotion %v after it\n",
		stall.Round(time.Millisecond), stallAt.Sub(killedAt).Seconds(), firstAfterPromotion(times, promotedAt).Round(time.Millisecond))
	if lost > 0 && *syncRep {
		fatal("acknowledged messages were lost with synchronous replication")
	}
}

func firstAfterPromotion(times []int64, at time.Time) time.Duration {
	for _, t := range times {
		if t > at.UnixNano() {
			return time.Duration(t - at.UnixNano())
		}
	}
	return -1
}

func receiptStatus(hub, id string) int {
	for try := 0; try < 20; try++ {
		resp, err := http.Get(hub + "/atp/receipts/" + id)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return resp.StatusCode
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return 0
}

func pgBin() string {
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.Sort(ds)
	if len(ds) == 0 {
		fatal("no PostgreSQL under /usr/lib/postgresql (scripts/postgres-test-server.sh start installs it)")
	}
	return ds[len(ds)-1]
}

func asPostgres(pgbin, prog string, args ...string) {
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(pgbin, prog)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		fatalf("%s %v: %v\n%s", prog, args, err, out.String())
	}
}

func psql(pgbin string, port int, db, sql string) {
	out, err := exec.Command(filepath.Join(pgbin, "psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-d", db, "-qtAc", sql).CombinedOutput()
	if err != nil {
		fatalf("psql %s: %v\n%s", sql, err, out)
	}
}

// waitReplicated waits until the replica streams from the primary.
func waitReplicated(pgbin string) {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ := exec.Command(filepath.Join(pgbin, "psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(*primPort), "-U", "postgres", "-qtAc",
			"SELECT state || ' ' || sync_state FROM pg_stat_replication").CombinedOutput()
		if strings.HasPrefix(strings.TrimSpace(string(out)), "streaming") {
			log.Printf("replica: %s", strings.TrimSpace(string(out)))
			return
		}
	}
	fatal("the replica did not start streaming")
}

func stopPG(pgbin, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err != nil {
		return
	}
	cmd := exec.Command("runuser", "-u", "postgres", "--", filepath.Join(pgbin, "pg_ctl"), "-D", dir, "-m", "immediate", "stop")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard // the killed primary is not running
	_ = cmd.Run()
}

func postmasterPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	must(err)
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	must(err)
	return pid
}

func chown(dir string) {
	out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput()
	if err != nil {
		fatalf("chown: %v %s", err, out)
	}
}

func appendFile(path, s string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	must(err)
	_, err = f.WriteString(s)
	must(errors.Join(err, f.Close()))
}

// cleanups run at the end, or before a fatal error's exit: the clusters
// and hubs this program started must not outlive it.
var cleanups []func()

func runCleanups() {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

func fatalf(format string, args ...any) {
	log.Printf(format, args...)
	runCleanups()
	os.Exit(1)
}

func fatal(args ...any) { fatalf("%s", fmt.Sprint(args...)) }

func must(err error) {
	if err != nil {
		fatal(err)
	}
}
