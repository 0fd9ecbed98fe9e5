package sqlsearch

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// dollar is a dialect that shows each part of the query plainly.
var dollar = Dialect{
	Param:    func(n int) string { return "$" + strconv.Itoa(n) },
	Contains: func(h, n string) string { return "has(" + h + ", " + n + ")" },
	BodyText: "text(body)",
}

func TestQuery(t *testing.T) {
	tests := []struct {
		name     string
		q        core.MessageQuery
		wantSQL  string
		wantArgs []any
	}{
		{"no filter", core.MessageQuery{Limit: 50},
			"SELECT c FROM messages ORDER BY seq DESC LIMIT $1", []any{50}},
		{"a page back", core.MessageQuery{BeforeSeq: 9, Limit: 2},
			"SELECT c FROM messages WHERE seq < $1 ORDER BY seq DESC LIMIT $2", []any{int64(9), 2}},
		{"agent: one argument, named twice", core.MessageQuery{Agent: "a", Limit: 5},
			"SELECT c FROM messages WHERE (sender = $1 OR receiver = $1) ORDER BY seq DESC LIMIT $2", []any{"a", 5}},
		{"sender, receiver, status, conversation", core.MessageQuery{Sender: "s", Receiver: "r", Status: core.StatusDelivered, ConversationID: "c1", Limit: 5},
			"SELECT c FROM messages WHERE sender = $1 AND receiver = $2 AND status = $3 AND conversation_id = $4 ORDER BY seq DESC LIMIT $5",
			[]any{"s", "r", "delivered", "c1", 5}},
		{"protocol in the body", core.MessageQuery{Protocol: "mamp", Limit: 5},
			`SELECT c FROM messages WHERE has(text(body), $1) ORDER BY seq DESC LIMIT $2`, []any{`"protocol":"mamp"`, 5}},
		{"text after other filters", core.MessageQuery{Agent: "a", Text: "x", Limit: 5},
			"SELECT c FROM messages WHERE (sender = $1 OR receiver = $1) AND (has(id, $2) OR has(sender, $2) OR has(receiver, $2) OR has(text(body), $2)) ORDER BY seq DESC LIMIT $3",
			[]any{"a", "x", 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := Query(tt.q, "c", dollar)
			if sql != tt.wantSQL {
				t.Errorf("sql\n got %s\nwant %s", sql, tt.wantSQL)
			}
			if !reflect.DeepEqual(args, tt.wantArgs) {
				t.Errorf("args %#v, want %#v", args, tt.wantArgs)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	stored := map[string]*core.Message{"m1": {ID: "m1"}, "m3": {ID: "m3"}}
	get := func(_ context.Context, id string) (*core.Message, error) {
		if m, ok := stored[id]; ok {
			return m, nil
		}
		return nil, errors.New("not found")
	}
	rcs := []*core.Receipt{{MessageID: "m3"}, {MessageID: "m2"}, {MessageID: "m1"}}
	got := Messages(context.Background(), rcs, get)
	if len(got) != 2 || got[0].Message.ID != "m3" || got[0].Receipt != rcs[0] || got[1].Message.ID != "m1" || got[1].Receipt != rcs[2] {
		t.Errorf("got %+v, want m3 and m1 with their receipts (m2 purged)", got)
	}
}
