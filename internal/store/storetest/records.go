package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

var recordCases = []testCase{
	{"versioned writes", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		r1, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Index: "ctx-a", Data: []byte(`{"state":"submitted"}`), UpdatedAt: base})
		if err != nil || r1.Version != 1 {
			t.Fatalf("create = %+v, %v; want version 1", r1, err)
		}
		_, err = s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), UpdatedAt: base})
		wantErr(t, "create existing", err, core.ErrConflict)
		r2, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Index: "ctx-b", Data: []byte(`{"state":"working"}`), Version: 1, UpdatedAt: at(time.Second)})
		if err != nil || r2.Version != 2 {
			t.Fatalf("update = %+v, %v; want version 2", r2, err)
		}
		_, err = s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), Version: 1, UpdatedAt: at(2 * time.Second)})
		wantErr(t, "stale update", err, core.ErrConflict)
		_, err = s.PutRecord(ctx, core.Record{Kind: "task", ID: "ghost", Data: []byte(`{}`), Version: 3, UpdatedAt: base})
		wantErr(t, "update missing", err, core.ErrConflict)
		got, err := s.GetRecord(ctx, "task", "t1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != "task" || got.ID != "t1" || got.Index != "ctx-b" || string(got.Data) != `{"state":"working"}` || got.Version != 2 {
			t.Fatalf("GetRecord = %+v", got)
		}
		wantTime(t, "record UpdatedAt", got.UpdatedAt, at(time.Second))
		_, err = s.GetRecord(ctx, "push", "t1")
		wantErr(t, "GetRecord other kind", err, core.ErrNotFound)
		_, err = s.GetRecord(ctx, "task", "ghost")
		wantErr(t, "GetRecord missing", err, core.ErrNotFound)
	}},
	{"binary data round trips", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		data := []byte{0, 1, 2, 0xff, '{', 0x80}
		if _, err := s.PutRecord(ctx, core.Record{Kind: "cred", ID: "k", Data: data, UpdatedAt: base}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRecord(ctx, "cred", "k")
		if err != nil || string(got.Data) != string(data) {
			t.Fatalf("GetRecord = %v, %v; want %v", got.Data, err, data)
		}
	}},
	{"list by kind and index", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		for i, spec := range []struct{ kind, id, index string }{
			{"task", "t1", "ctx-a"}, {"task", "t2", "ctx-b"}, {"task", "t3", "ctx-a"}, {"push", "p1", "ctx-a"}, {"task", "t4", ""},
		} {
			if _, err := s.PutRecord(ctx, core.Record{Kind: spec.kind, ID: spec.id, Index: spec.index, Data: []byte(`{}`), UpdatedAt: at(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		// Touch t1 so it becomes the most recent.
		if _, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Index: "ctx-a", Data: []byte(`{"v":2}`), Version: 1, UpdatedAt: at(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			kind, index string
			limit       int
			want        []string
		}{
			{"task", "", 0, []string{"t1", "t4", "t3", "t2"}},
			{"task", "ctx-a", 0, []string{"t1", "t3"}},
			{"task", "ctx-b", 0, []string{"t2"}},
			{"push", "", 0, []string{"p1"}},
			{"task", "", 2, []string{"t1", "t4"}},
			{"none", "", 0, []string{}},
		}
		for _, tt := range tests {
			rs, err := s.ListRecords(ctx, tt.kind, tt.index, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(rs))
			for i, r := range rs {
				got[i] = r.ID
			}
			wantIDs(t, fmt.Sprintf("ListRecords(%q, %q, %d)", tt.kind, tt.index, tt.limit), got, tt.want)
		}
	}},
	{"list after an id, in id order", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		// Put in another order than the ids', and with ids whose bytewise
		// order differs from a locale's ("B" < "a" < "b" bytewise).
		for i, spec := range []struct{ kind, id, index string }{
			{"cb", "b2", "open"}, {"cb", "a1", "open"}, {"cb", "B0", "open"}, {"cb", "c3", "closed"}, {"cb", "d4", "open"}, {"other", "a0", "open"},
		} {
			if _, err := s.PutRecord(ctx, core.Record{Kind: spec.kind, ID: spec.id, Index: spec.index, Data: []byte(`{}`), UpdatedAt: at(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			kind, index, after string
			limit              int
			want               []string
		}{
			{"cb", "", "", 0, []string{"B0", "a1", "b2", "c3", "d4"}},
			{"cb", "", "", 2, []string{"B0", "a1"}},
			{"cb", "", "a1", 2, []string{"b2", "c3"}},
			{"cb", "", "c3", 2, []string{"d4"}},
			{"cb", "", "d4", 2, []string{}},
			{"cb", "open", "", 0, []string{"B0", "a1", "b2", "d4"}},
			{"cb", "open", "b2", 0, []string{"d4"}},
			{"cb", "open", "a", 0, []string{"a1", "b2", "d4"}}, // after an id that is not there
			{"none", "", "", 0, []string{}},
		}
		for _, tt := range tests {
			rs, err := s.ListRecordsAfter(ctx, tt.kind, tt.index, tt.after, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(rs))
			for i, r := range rs {
				got[i] = r.ID
			}
			wantIDs(t, fmt.Sprintf("ListRecordsAfter(%q, %q, %q, %d)", tt.kind, tt.index, tt.after, tt.limit), got, tt.want)
		}
	}},
	{"delete", func(t *testing.T, s core.Store) {
		ctx := context.Background()
		if _, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), UpdatedAt: base}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRecord(ctx, "task", "t1"); err != nil {
			t.Fatalf("DeleteRecord: %v", err)
		}
		_, err := s.GetRecord(ctx, "task", "t1")
		wantErr(t, "GetRecord deleted", err, core.ErrNotFound)
		wantErr(t, "DeleteRecord again", s.DeleteRecord(ctx, "task", "t1"), core.ErrNotFound)
		// Deleted records can be created again from version 0.
		r, err := s.PutRecord(ctx, core.Record{Kind: "task", ID: "t1", Data: []byte(`{}`), UpdatedAt: base})
		if err != nil || r.Version != 1 {
			t.Fatalf("recreate = %+v, %v", r, err)
		}
	}},
}
