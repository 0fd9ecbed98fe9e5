package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/deliver/webhook"
)

// pushRecord is a push notification config as the store keeps it.
type pushRecord struct {
	Config *sdk.PushConfig `json:"config"`
	// Protocol is the version the config was created with: 1.0 configs get
	// stream events, 0.3 configs get the task.
	Protocol Version `json:"protocol"`
}

func pushKey(taskID sdk.TaskID, id string) string { return string(taskID) + "/" + id }

// MaxPushConfigs is how many push notification configs one task may have:
// every change of the task is POSTed to each, so without a bound one
// client could make the hub send any number of requests per change.
const MaxPushConfigs = 16

// pushStripes is the number of locks that serialise the creation of push
// configs, a task's always taking the same one.
const pushStripes = 64

func taskStripe(id sdk.TaskID) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32() % pushStripes
}

// ErrTooManyPushConfigs refuses a config past MaxPushConfigs for a task.
var ErrTooManyPushConfigs = errors.New("too many push notification configs for the task")

// savePush creates or replaces a push config.
func (s *Server) savePush(ctx context.Context, v Version, c *sdk.PushConfig) (*sdk.PushConfig, error) {
	if c.ID == "" {
		c.ID = core.NewID()
	}
	// A new config must find room. The count and the write are one step on
	// this instance (instances sharing a store can pass the bound by their
	// number when they create configs for one task at the same moment).
	mu := &s.pushLocks[taskStripe(c.TaskID)]
	mu.Lock()
	defer mu.Unlock()
	recs, err := s.relay.Store().ListRecords(ctx, KindPush, string(c.TaskID), MaxPushConfigs+1)
	if err != nil {
		return nil, err
	}
	if len(recs) >= MaxPushConfigs && !slices.ContainsFunc(recs, func(r core.Record) bool { return r.ID == pushKey(c.TaskID, c.ID) }) {
		return nil, fmt.Errorf("task %s has %d: %w", c.TaskID, len(recs), ErrTooManyPushConfigs)
	}
	c.Tenant = ""
	b, err := json.Marshal(pushRecord{Config: c, Protocol: v})
	if err != nil {
		return nil, err
	}
	rec := core.Record{Kind: KindPush, ID: pushKey(c.TaskID, c.ID), Index: string(c.TaskID), Data: b, UpdatedAt: s.relay.Clock().Now()}
	for attempt := 0; attempt < 5; attempt++ {
		_, err = s.relay.Store().PutRecord(ctx, rec)
		if !errors.Is(err, core.ErrConflict) {
			break
		}
		old, gerr := s.relay.Store().GetRecord(ctx, KindPush, rec.ID)
		if gerr != nil {
			return nil, gerr
		}
		rec.Version = old.Version
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (s *Server) pushConfigs(ctx context.Context, taskID string) ([]pushRecord, error) {
	recs, err := s.relay.Store().ListRecords(ctx, KindPush, taskID, 1000)
	if err != nil {
		return nil, err
	}
	out := make([]pushRecord, 0, len(recs))
	for _, r := range recs {
		var p pushRecord
		if json.Unmarshal(r.Data, &p) == nil && p.Config != nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func encodePush(v Version, c *sdk.PushConfig) any {
	if v == V03 {
		return pushToV03(c)
	}
	return c
}

// pushParams reads the task id and config id of a get/delete/list call.
func pushParams(v Version, req *Request) (taskID, id string, e *RPCError) {
	if v == V03 {
		var p struct {
			ID       string `json:"id"`
			ConfigID string `json:"pushNotificationConfigId"`
		}
		if e := decodeParams(req, &p); e != nil {
			return "", "", e
		}
		return p.ID, p.ConfigID, nil
	}
	var p struct {
		TaskID string `json:"taskId"`
		ID     string `json:"id"`
	}
	if e := decodeParams(req, &p); e != nil {
		return "", "", e
	}
	return p.TaskID, p.ID, nil
}

func (s *Server) pushSet(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	var c *sdk.PushConfig
	if v == V03 {
		var p v03TaskPushConfig
		if e := decodeParams(req, &p); e != nil {
			return nil, e
		}
		c = pushFromV03(p.TaskID, p.PushNotificationConfig)
	} else {
		c = &sdk.PushConfig{}
		if e := decodeParams(req, c); e != nil {
			return nil, e
		}
	}
	if c.TaskID == "" {
		return nil, rpcErr(CodeInvalidParams, "taskId is required")
	}
	if err := checkPushURL(c.URL); err != nil {
		return nil, rpcErr(CodeInvalidParams, "push notification config: %v", err)
	}
	if e := s.checkPush(c); e != nil {
		return nil, e
	}
	if c.Auth != nil && c.Auth.Scheme == "" {
		return nil, rpcErr(CodeInvalidParams, "authentication.scheme is required")
	}
	if _, e := s.loadTask(ctx, ag, string(c.TaskID)); e != nil {
		return nil, e
	}
	out, err := s.savePush(ctx, v, c)
	if err != nil {
		return nil, toRPCError(err)
	}
	return encodePush(v, out), nil
}

// taskPushConfigs reads the params of a push config call, checks the
// caller may see the task, and returns its configs.
func (s *Server) taskPushConfigs(ctx context.Context, ag *core.Agent, v Version, req *Request) (taskID, id string, cs []pushRecord, e *RPCError) {
	if taskID, id, e = pushParams(v, req); e != nil {
		return "", "", nil, e
	}
	if _, e := s.loadTask(ctx, ag, taskID); e != nil {
		return "", "", nil, e
	}
	cs, err := s.pushConfigs(ctx, taskID)
	if err != nil {
		return "", "", nil, toRPCError(err)
	}
	return taskID, id, cs, nil
}

func (s *Server) pushGet(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	taskID, id, cs, e := s.taskPushConfigs(ctx, ag, v, req)
	if e != nil {
		return nil, e
	}
	for _, c := range cs {
		if id == "" || c.Config.ID == id {
			return encodePush(v, c.Config), nil
		}
	}
	return nil, rpcErr(CodeInvalidParams, "task %s has no push notification config %q", taskID, id)
}

func (s *Server) pushList(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	_, _, cs, e := s.taskPushConfigs(ctx, ag, v, req)
	if e != nil {
		return nil, e
	}
	if v == V03 {
		out := make([]v03TaskPushConfig, 0, len(cs))
		for _, c := range cs {
			out = append(out, pushToV03(c.Config))
		}
		return out, nil
	}
	out := sdk.ListTaskPushConfigResponse{Configs: []*sdk.PushConfig{}}
	for _, c := range cs {
		out.Configs = append(out.Configs, c.Config)
	}
	return out, nil
}

func (s *Server) pushDelete(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	taskID, id, e := pushParams(v, req)
	if e != nil {
		return nil, e
	}
	if id == "" {
		return nil, rpcErr(CodeInvalidParams, "the push notification config id is required")
	}
	if _, e := s.loadTask(ctx, ag, taskID); e != nil {
		return nil, e
	}
	err := s.relay.Store().DeleteRecord(ctx, KindPush, pushKey(sdk.TaskID(taskID), id))
	if errors.Is(err, core.ErrNotFound) {
		return nil, rpcErr(CodeInvalidParams, "task %s has no push notification config %q", taskID, id)
	}
	if err != nil {
		return nil, toRPCError(err)
	}
	if v == V03 {
		return nil, nil
	}
	return struct{}{}, nil
}

// pushChange sends the events of a task change to the task's push
// notification configs. Each push is a relay message to a hidden agent
// standing for the config's URL (endpoint kind EndpointPush), so pushes are
// durable, ordered per config, retried with the relay's backoff until their
// TTL, and dead-lettered like any message.
func (s *Server) pushChange(old, cur *TaskRecord) {
	evs := Diff(old.Task, cur.Task)
	if len(evs) == 0 {
		return
	}
	ctx := s.opt.Context
	cs, err := s.pushConfigs(ctx, string(cur.Task.ID))
	if err != nil || len(cs) == 0 {
		return
	}
	task := view(cur, nil, true)
	for _, c := range cs {
		var bodies [][]byte
		if c.Protocol == V03 {
			b, _ := json.Marshal(taskToV03(task))
			bodies = append(bodies, b)
		} else {
			for _, ev := range evs {
				b, _ := json.Marshal(sdk.StreamResponse{Event: ev})
				bodies = append(bodies, b)
			}
		}
		target, err := s.pushAgent(ctx, c)
		if err != nil {
			s.log.Warn("a2a: push target", "task", c.Config.TaskID, "err", err)
			continue
		}
		for _, b := range bodies {
			m := &core.Message{ID: core.NewID(), Sender: cur.Agent, Receiver: target, Type: "a2a.push", Protocol: "a2a",
				TTL: pushTTL, Parts: []core.Part{{Kind: core.PartData, Data: b}},
				Metadata: map[string]any{"a2a_task_id": string(cur.Task.ID)}}
			if _, err := s.relay.Send(ctx, m); err != nil {
				s.log.Warn("a2a: push notification not queued", "task", c.Config.TaskID, "err", err)
			}
		}
	}
}

// pushTTL bounds how long a push notification is retried.
const pushTTL = time.Hour

// EndpointPush is the endpoint kind of the hidden agents that stand for
// push notification URLs.
const EndpointPush core.EndpointKind = "a2a-push"

// pushHeaders is what a push agent's card keeps to authenticate its pushes.
type pushHeaders struct {
	Token       string `json:"token,omitempty"`
	Scheme      string `json:"scheme,omitempty"`
	Credentials string `json:"credentials,omitempty"`
}

// pushAgentID is the id of the hidden agent that stands for a push
// config's URL: an internal id of the relay's (reserved to the hub, keyed,
// hidden from listings).
func (s *Server) pushAgentID(c pushRecord) string {
	return s.relay.InternalID("a2a-push", string(c.Config.TaskID), c.Config.ID, c.Config.URL)
}

// pushAgent registers (or refreshes) the hidden agent for a push config and
// returns its id.
func (s *Server) pushAgent(ctx context.Context, c pushRecord) (string, error) {
	id := s.pushAgentID(c)
	h := pushHeaders{Token: c.Config.Token}
	if a := c.Config.Auth; a != nil {
		h.Scheme, h.Credentials = a.Scheme, a.Credentials
	}
	extra, _ := json.Marshal(h)
	s.pushMu.Lock()
	fresh := time.Since(s.pushSeen[id]) < time.Hour
	s.pushMu.Unlock()
	if fresh {
		return id, nil
	}
	a := &core.Agent{ID: id, Protocol: "a2a-push", Capabilities: []string{},
		Endpoint: core.Endpoint{Kind: EndpointPush, URL: c.Config.URL},
		Card:     core.Card{Name: "A2A push notifications for task " + string(c.Config.TaskID), Extra: extra}}
	if _, _, err := s.relay.Register(ctx, a, 2*pushTTL); err != nil {
		return "", err
	}
	s.pushMu.Lock()
	s.pushSeen[id] = time.Now()
	s.pushMu.Unlock()
	return id, nil
}

// PushDeliverer posts queued push notifications to their URL with the
// config's token and authentication; it is the core.Deliverer for
// EndpointPush.
type PushDeliverer struct{ Client *http.Client }

// Deliver implements core.Deliverer.
func (d PushDeliverer) Deliver(ctx context.Context, a *core.Agent, m *core.Message) core.Delivery {
	if len(m.Parts) != 1 || len(m.Parts[0].Data) == 0 {
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusBadRequest, Detail: "not a push notification"}
	}
	var h pushHeaders
	_ = json.Unmarshal(a.Card.Extra, &h)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Endpoint.URL, bytes.NewReader(m.Parts[0].Data))
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRejected, Code: http.StatusBadRequest, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "switchboard-a2a")
	if h.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", h.Token)
	}
	if h.Credentials != "" {
		req.Header.Set("Authorization", h.Scheme+" "+h.Credentials)
	}
	if m.TraceParent != "" {
		req.Header.Set("traceparent", m.TraceParent)
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return core.Delivery{Kind: core.OutcomeRetry, Err: err}
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return webhook.Classify(resp.StatusCode, reply)
}
