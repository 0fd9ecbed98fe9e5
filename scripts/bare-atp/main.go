// Command bare-atp is the ceiling the hub is measured against: a bare
// net/http server that answers the ATP calls `switchboard bench` makes at
// once — POST /atp/register and POST /atp/send read and decode the JSON
// body and answer as the hub would (the send "queued"), storing and
// delivering nothing. Run the same load tool against it and the hub, on
// the same machine, side by side (scripts/bench-ceiling.sh).
//
//	go run ./scripts/bare-atp -addr 127.0.0.1:0    # prints the address it listens on
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().String())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /atp/register", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			AgentID string `json:"agent_id"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "agent_id": req.AgentID, "lease_seconds": 300})
	})
	mux.HandleFunc("POST /atp/send", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MessageID string          `json:"message_id"`
			Sender    string          `json:"sender"`
			Receiver  string          `json:"receiver"`
			Type      string          `json:"type"`
			Payload   json.RawMessage `json:"payload"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"status": "queued", "message_id": req.MessageID, "receipt": nil})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	log.Fatal(srv.Serve(ln))
}
