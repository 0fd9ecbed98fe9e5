package a2a

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Page sizes of ListTasks (the specification's bounds and default).
const (
	minPageSize     = 1
	maxPageSize     = 100
	defaultPageSize = 50
)

// maxListed bounds how many of an agent's tasks one ListTasks call reads
// (the most recently updated ones).
const maxListed = 10000

type zeroPageSizeKey struct{}

// withZeroPageSize marks a request that gave pageSize 0 explicitly: the
// SDK's request type cannot tell it from an absent pageSize (which means
// the default), and the specification refuses it.
func withZeroPageSize(ctx context.Context) context.Context {
	return context.WithValue(ctx, zeroPageSizeKey{}, true)
}

// cursor is a position in the order ListTasks answers in: status time,
// newest first, then task id.
type cursor struct {
	at time.Time
	id string
}

// before reports whether a task at (at, id) comes after the cursor in the
// listing order.
func (c cursor) before(at time.Time, id string) bool {
	if !at.Equal(c.at) {
		return at.Before(c.at)
	}
	return id < c.id
}

func (c cursor) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "/" + c.id))
}

func parseCursor(tok string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cursor{}, invalid("pageToken is not a token this hub issued")
	}
	ns, id, ok := strings.Cut(string(b), "/")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, invalid("pageToken is not a token this hub issued")
	}
	return cursor{at: time.Unix(0, n).UTC(), id: id}, nil
}

func statusTime(t *sdk.Task) time.Time {
	if t.Status.Timestamp != nil {
		return *t.Status.Timestamp
	}
	return time.Time{}
}

// ListTasks implements a2asrv.RequestHandler: the tasks of the agent that
// the caller may see (those its credential created; all of them for the
// operator and in dev mode), newest status first, a page at a time. The
// page token is a cursor (the last task's status time and id), so a task
// created or updated while a client pages moves ahead of the pages still
// to come and never shows twice. A contextId the caller takes no part in
// is refused as the other protocols refuse it (not found).
func (h *handler) ListTasks(ctx context.Context, req *sdk.ListTasksRequest) (*sdk.ListTasksResponse, error) {
	s := h.s
	size := req.PageSize
	if size == 0 {
		if ctx.Value(zeroPageSizeKey{}) != nil {
			return nil, invalid(fmt.Sprintf("pageSize must be between %d and %d inclusive, got 0", minPageSize, maxPageSize))
		}
		size = defaultPageSize
	}
	if size < minPageSize || size > maxPageSize {
		return nil, invalid(fmt.Sprintf("pageSize must be between %d and %d inclusive, got %d", minPageSize, maxPageSize, size))
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, invalid("historyLength must not be negative")
	}
	var want sdk.TaskState
	if req.Status != sdk.TaskStateUnspecified && req.Status != "" {
		st, ok := ParseState(string(req.Status))
		if !ok {
			return nil, invalid(fmt.Sprintf("unknown status %q", req.Status))
		}
		want = st
	}
	var after *cursor
	if req.PageToken != "" {
		c, err := parseCursor(req.PageToken)
		if err != nil {
			return nil, err
		}
		after = &c
	}
	ag, err := s.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	p := core.PrincipalFrom(ctx)
	if req.ContextID != "" && !p.Admin && !p.Dev {
		if _, err := s.relay.Conversation(ctx, p, req.ContextID); err != nil {
			return nil, wireError(ctx, err)
		}
	}
	recs, err := s.tasks.list(ctx, ag.ID, maxListed)
	if err != nil {
		return nil, wireError(ctx, err)
	}
	var since time.Time // the caller's identity began then
	if !p.Admin && !p.Dev {
		self, err := s.relay.LookupAgent(ctx, p, p.AgentID)
		if err != nil {
			return nil, wireError(ctx, err)
		}
		since = self.RegisteredAt
	}
	var match []*TaskRecord
	for _, r := range recs {
		switch {
		case !p.Admin && !p.Dev && (r.Owner != p.AgentID || r.created().Before(since)):
		case req.ContextID != "" && r.Task.ContextID != req.ContextID:
		case want != "" && r.Task.Status.State != want:
		case req.StatusTimestampAfter != nil && !statusTime(r.Task).After(*req.StatusTimestampAfter):
		default:
			match = append(match, r)
		}
	}
	slices.SortFunc(match, func(a, b *TaskRecord) int {
		if c := statusTime(b.Task).Compare(statusTime(a.Task)); c != 0 {
			return c
		}
		return cmp.Compare(string(b.Task.ID), string(a.Task.ID))
	})
	out := &sdk.ListTasksResponse{Tasks: []*sdk.Task{}, TotalSize: len(match), PageSize: size}
	start := 0
	if after != nil {
		start = len(match)
		for i, r := range match {
			if after.before(statusTime(r.Task), string(r.Task.ID)) {
				start = i
				break
			}
		}
	}
	end := min(start+size, len(match))
	for _, r := range match[start:end] {
		out.Tasks = append(out.Tasks, view(r, req.HistoryLength, req.IncludeArtifacts))
	}
	if end < len(match) {
		last := match[end-1]
		out.NextPageToken = cursor{at: statusTime(last.Task), id: string(last.Task.ID)}.token()
	}
	return out, nil
}
