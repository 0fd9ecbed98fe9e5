package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/switchboard-hub/switchboard/internal/core"
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

// maxPushConfigID bounds a push config's id, so that with its task's id it
// stays a key the stores keep (core.MaxStoredText).
const maxPushConfigID = 256

// checkPush checks a push notification config's URL: its form, the
// addresses no policy allows, and the operator's SSRF policy
// (Options.CheckURL).
func (s *Server) checkPush(c *sdk.PushConfig) error {
	if c == nil {
		return nil
	}
	if err := checkPushURL(c.URL); err != nil {
		return invalid(fmt.Sprintf("push notification config: %v", err))
	}
	if c.Auth != nil && c.Auth.Scheme == "" {
		return invalid("push notification config: authentication.scheme is required")
	}
	// The id is part of the key it is stored under, with the task's id.
	if len(c.ID) > maxPushConfigID {
		return invalid(fmt.Sprintf("push notification config: id is %d bytes long, over %d", len(c.ID), maxPushConfigID))
	}
	if s.opt.CheckURL != nil {
		if err := s.opt.CheckURL(c.URL); err != nil {
			return invalid(fmt.Sprintf("push notification config: url: %v", err))
		}
	}
	return nil
}

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
	st := s.opt.Records
	recs, err := st.ListRecords(ctx, KindPush, string(c.TaskID), MaxPushConfigs+1)
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
		_, err = st.PutRecord(ctx, rec)
		if !errors.Is(err, core.ErrConflict) {
			break
		}
		old, gerr := st.GetRecord(ctx, KindPush, rec.ID)
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
	recs, err := s.opt.Records.ListRecords(ctx, KindPush, taskID, 1000)
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

// CreateTaskPushConfig implements a2asrv.RequestHandler.
func (h *handler) CreateTaskPushConfig(ctx context.Context, c *sdk.PushConfig) (*sdk.PushConfig, error) {
	s := h.s
	if c.TaskID == "" {
		return nil, invalid("taskId is required")
	}
	if err := s.checkPush(c); err != nil {
		return nil, err
	}
	if _, err := s.agentSeeing(ctx, c.Tenant, string(c.TaskID)); err != nil {
		return nil, err
	}
	cp := *c
	out, err := s.savePush(ctx, versionOf(ctx), &cp)
	if err != nil {
		return nil, wireError(ctx, err)
	}
	return out, nil
}

// taskPushConfigs checks the caller may see the task and returns its
// configs.
func (s *Server) taskPushConfigs(ctx context.Context, tenant string, taskID sdk.TaskID) ([]pushRecord, error) {
	if _, err := s.agentSeeing(ctx, tenant, string(taskID)); err != nil {
		return nil, err
	}
	cs, err := s.pushConfigs(ctx, string(taskID))
	if err != nil {
		return nil, wireError(ctx, err)
	}
	return cs, nil
}

// GetTaskPushConfig implements a2asrv.RequestHandler.
func (h *handler) GetTaskPushConfig(ctx context.Context, req *sdk.GetTaskPushConfigRequest) (*sdk.PushConfig, error) {
	cs, err := h.s.taskPushConfigs(ctx, req.Tenant, req.TaskID)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if req.ID == "" || c.Config.ID == req.ID {
			return c.Config, nil
		}
	}
	return nil, wireError(ctx, fmt.Errorf("task %s has no push notification config %q: %w", req.TaskID, req.ID, core.ErrNotFound))
}

// ListTaskPushConfigs implements a2asrv.RequestHandler.
func (h *handler) ListTaskPushConfigs(ctx context.Context, req *sdk.ListTaskPushConfigRequest) (*sdk.ListTaskPushConfigResponse, error) {
	cs, err := h.s.taskPushConfigs(ctx, req.Tenant, req.TaskID)
	if err != nil {
		return nil, err
	}
	out := &sdk.ListTaskPushConfigResponse{Configs: []*sdk.PushConfig{}}
	for _, c := range cs {
		out.Configs = append(out.Configs, c.Config)
	}
	return out, nil
}

// DeleteTaskPushConfig implements a2asrv.RequestHandler.
func (h *handler) DeleteTaskPushConfig(ctx context.Context, req *sdk.DeleteTaskPushConfigRequest) error {
	s := h.s
	if req.ID == "" {
		return invalid("the push notification config id is required")
	}
	if _, err := s.taskPushConfigs(ctx, req.Tenant, req.TaskID); err != nil {
		return err
	}
	err := s.opt.Records.DeleteRecord(ctx, KindPush, pushKey(req.TaskID, req.ID))
	if errors.Is(err, core.ErrNotFound) {
		return wireError(ctx, fmt.Errorf("task %s has no push notification config %q: %w", req.TaskID, req.ID, core.ErrNotFound))
	}
	return wireError(ctx, err)
}

// changed is the tasks' change hook: it marks a task that reached a
// terminal state for retirement, then queues the change's push
// notifications, before the change is answered (so that a config deleted
// right after a change still gets the change's push).
func (s *Server) changed(old, cur *TaskRecord) {
	// Not the request's context: the change stands once stored, whether
	// or not its caller is still waiting.
	ctx := context.Background()
	s.retireOnFinish(ctx, old, cur)
	s.pushChange(ctx, old, cur)
}

// pushChange sends the events of a task change to the task's push
// notification configs. Each push is a relay message to a hidden agent
// standing for the config's URL (endpoint kind EndpointPush), so pushes are
// durable, ordered per config, retried with the relay's backoff until their
// TTL, and dead-lettered like any message.
func (s *Server) pushChange(ctx context.Context, old, cur *TaskRecord) {
	evs := Diff(old.Task, cur.Task)
	if len(evs) == 0 {
		return
	}
	cs, err := s.pushConfigs(ctx, string(cur.Task.ID))
	if err != nil || len(cs) == 0 {
		return
	}
	task := view(cur, nil, true)
	for _, c := range cs {
		var bodies [][]byte
		if c.Protocol == V03 {
			b, _ := json.Marshal(a2av0.FromV1Task(task))
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
				Metadata: map[string]any{MetaTaskID: string(cur.Task.ID)}}
			if _, err := s.relay.SendAs(ctx, s.hub, m); err != nil {
				s.log.Warn("a2a: push notification not queued", "task", c.Config.TaskID, "err", err)
			}
		}
	}
}

// pushTTL bounds how long a push notification is retried.
const pushTTL = time.Hour

// EndpointPush is the endpoint kind of the hidden agents that stand for
// push notification URLs; the hub delivers to them with its webhook
// deliverer, encoded by PushEncoder and signed by PushSigner.
const EndpointPush core.EndpointKind = "a2a-push"

// pushHeaders is what a push agent's card keeps to authenticate its pushes.
type pushHeaders struct {
	Token       string `json:"token,omitempty"`
	Scheme      string `json:"scheme,omitempty"`
	Credentials string `json:"credentials,omitempty"`
	// ContentType is application/a2a+json for 1.0 configs (the
	// specification's), application/json for 0.3 ones.
	ContentType string `json:"content_type,omitempty"`
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
	h := pushHeaders{Token: c.Config.Token, ContentType: "application/a2a+json"}
	if c.Protocol == V03 {
		h.ContentType = "application/json"
	}
	if a := c.Config.Auth; a != nil {
		h.Scheme, h.Credentials = a.Scheme, a.Credentials
	}
	extra, _ := json.Marshal(h)
	s.helperMu.Lock()
	fresh := time.Since(s.helperSeen[id]) < time.Hour
	s.helperMu.Unlock()
	if fresh {
		return id, nil
	}
	a := &core.Agent{ID: id, Protocol: "a2a-push", Capabilities: []string{},
		Endpoint: core.Endpoint{Kind: EndpointPush, URL: c.Config.URL},
		Card:     core.Card{Name: "A2A push notifications for task " + string(c.Config.TaskID), Extra: extra}}
	if _, _, err := s.relay.RegisterAs(ctx, s.hub, a, 2*pushTTL); err != nil {
		return "", err
	}
	s.helperMu.Lock()
	s.helperSeen[id] = time.Now()
	s.helperMu.Unlock()
	return id, nil
}

// PushEncoder renders a queued push notification as its request body: the
// stream event (1.0) or task (0.3) it carries, with the content type the
// config's version calls for. It has the method of the hub's webhook
// deliverer's Encoder.
type PushEncoder struct{}

// Encode returns the push's body and content type.
func (PushEncoder) Encode(a *core.Agent, m *core.Message) ([]byte, string, error) {
	if len(m.Parts) != 1 || len(m.Parts[0].Data) == 0 {
		return nil, "", errors.New("not a push notification")
	}
	var h pushHeaders
	_ = json.Unmarshal(a.Card.Extra, &h)
	ct := h.ContentType
	if ct == "" {
		ct = "application/a2a+json"
	}
	return m.Parts[0].Data, ct, nil
}

// PushSigner adds a push's authentication: the config's token as
// X-A2A-Notification-Token, and its authentication as
// "Authorization: <scheme> <credentials>". It has the method of the hub's
// webhook deliverer's Signer.
type PushSigner struct{}

// Sign sets the push's authentication headers.
func (PushSigner) Sign(req *http.Request, a *core.Agent, _ string, _ []byte) error {
	var h pushHeaders
	_ = json.Unmarshal(a.Card.Extra, &h)
	if h.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", h.Token)
	}
	if h.Credentials != "" {
		req.Header.Set("Authorization", h.Scheme+" "+h.Credentials)
	}
	req.Header.Set("User-Agent", "switchboard-a2a")
	return nil
}
