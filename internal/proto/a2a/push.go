package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

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

// savePush creates or replaces a push config.
func (s *Server) savePush(ctx context.Context, v Version, c *sdk.PushConfig) (*sdk.PushConfig, error) {
	if c.ID == "" {
		c.ID = core.NewID()
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

func (s *Server) pushGet(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	taskID, id, e := pushParams(v, req)
	if e != nil {
		return nil, e
	}
	if _, e := s.loadTask(ctx, ag, taskID); e != nil {
		return nil, e
	}
	cs, err := s.pushConfigs(ctx, taskID)
	if err != nil {
		return nil, toRPCError(err)
	}
	for _, c := range cs {
		if id == "" || c.Config.ID == id {
			return encodePush(v, c.Config), nil
		}
	}
	return nil, rpcErr(CodeInvalidParams, "task %s has no push notification config %q", taskID, id)
}

func (s *Server) pushList(ctx context.Context, ag *core.Agent, v Version, req *Request) (any, *RPCError) {
	taskID, _, e := pushParams(v, req)
	if e != nil {
		return nil, e
	}
	if _, e := s.loadTask(ctx, ag, taskID); e != nil {
		return nil, e
	}
	cs, err := s.pushConfigs(ctx, taskID)
	if err != nil {
		return nil, toRPCError(err)
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
// notification configs, in the background.
func (s *Server) pushChange(old, cur *TaskRecord) {
	evs := Diff(old.Task, cur.Task)
	if len(evs) == 0 {
		return
	}
	cs, err := s.pushConfigs(s.opt.Context, string(cur.Task.ID))
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
		go s.deliverPush(c, bodies)
	}
}

// pushAttempts bounds the delivery attempts of one push notification.
const pushAttempts = 6

// deliverPush posts bodies in order to a push config's URL, retrying each
// with exponential backoff (relay.Backoff) on network errors, 408, 429 and
// 5xx answers.
func (s *Server) deliverPush(c pushRecord, bodies [][]byte) {
	for _, b := range bodies {
		for attempt := 1; ; attempt++ {
			err := s.postPush(c, b)
			if err == nil || errors.Is(err, errPermanent) || attempt >= pushAttempts {
				if err != nil {
					s.log.Warn("a2a: push notification not delivered", "task", c.Config.TaskID, "url", c.Config.URL, "err", err)
				}
				break
			}
			select {
			case <-s.opt.Context.Done():
				return
			case <-time.After(s.relay.Backoff(attempt)):
			}
		}
	}
}

var errPermanent = errors.New("refused by the receiver")

func (s *Server) postPush(c pushRecord, body []byte) error {
	ctx, cancel := context.WithTimeout(s.opt.Context, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Config.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%v: %w", err, errPermanent)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "switchboard-a2a")
	if c.Config.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", c.Config.Token)
	}
	if a := c.Config.Auth; a != nil && a.Credentials != "" {
		req.Header.Set("Authorization", a.Scheme+" "+a.Credentials)
	}
	resp, err := s.opt.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	switch st := resp.StatusCode; {
	case st >= 200 && st < 300:
		return nil
	case st == http.StatusRequestTimeout || st == http.StatusTooManyRequests || st >= 500:
		return fmt.Errorf("receiver answered %d", st)
	default:
		return fmt.Errorf("receiver answered %d: %w", st, errPermanent)
	}
}
