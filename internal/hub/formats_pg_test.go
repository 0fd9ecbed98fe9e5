package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/hub"
	"github.com/switchboard-hub/switchboard/internal/hub/hubtest"
	"github.com/switchboard-hub/switchboard/internal/store/postgres"
	"github.com/switchboard-hub/switchboard/internal/waitfor"
)

// TestNotificationFormatsAcrossInstances: a send waiting on hub B for its
// message's final status answers as soon as another instance's receipt
// notification arrives, in every format an earlier build wrote, and when
// the notification is one B cannot read (a newer build's, a garbled one,
// the empty one after a reconnect), which makes B's waits read the store.
// The "other instance" is a store on the same database whose own
// notifications go to channels B does not hear; the test then sends the
// notification itself with pg_notify. B's waits poll only once an hour,
// so only the notification can end them within the test.
func TestNotificationFormatsAcrossInstances(t *testing.T) {
	db := hubtest.PostgresDB(t)
	hb, b := hubtest.Start(t, hub.Options{StoreURL: db, Dev: true, Relay: core.Config{WaitPoll: time.Hour}})
	ctx := context.Background()
	other, err := postgres.Open(ctx, db, postgres.Options{ChannelPrefix: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	post := func(path string, body map[string]any) (int, []byte) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(path, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	for _, id := range []string{"asker", "worker"} {
		if code, out := post(b+"/atp/register", map[string]any{"agent_id": id, "delivery": "pull"}); code/100 != 2 {
			t.Fatalf("register %s: %d %s", id, code, out)
		}
	}
	for _, c := range []struct {
		name    string
		payload func(id string) string
	}{
		{"format 1: the id", func(id string) string { return id }},
		{"format 1: ids, one a line", func(id string) string { return "other-1\n" + id + "\nother-2" }},
		{"format 2: a JSON id", func(id string) string { b, _ := json.Marshal(id); return string(b) }},
		{"newer format", func(string) string { return `["v3","PEER",{"ended":1}]` }},
		{"garbled", func(string) string { return `{"message_id":` }},
		{"reconnect", func(string) string { return "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "m-" + time.Now().Format("150405.000000000")
			got := make(chan string, 1)
			go func() {
				code, out := post(b+"/atp/send?wait_ms=600000", map[string]any{"atp_version": "1.0", "message_id": id,
					"sender": "asker", "receiver": "worker", "type": "task.request", "payload": map[string]any{"text": "hi"}})
				var res struct{ Status string }
				_ = json.Unmarshal(out, &res)
				if code != http.StatusOK {
					res.Status = string(out)
				}
				got <- res.Status
			}()
			waitfor.True(t, "hub B to wait for "+id, func() bool { return hb.Relay.Follows(id) })
			// The other instance ends the message (a pull that acks).
			now := time.Now()
			ms, err := other.Pull(ctx, "worker", now, now.Add(time.Minute), 10, true)
			if err != nil || len(ms) != 1 || ms[0].ID != id {
				t.Fatalf("pull on the other instance: %d messages, %v", len(ms), err)
			}
			if _, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", postgres.DefaultChannelPrefix+"_receipt", c.payload(id)); err != nil {
				t.Fatal(err)
			}
			if status := waitfor.Recv(t, "the send waiting on hub B to answer", got); status != string(core.StatusDelivered) {
				t.Fatalf("send answered %q, want delivered", status)
			}
		})
	}
}
