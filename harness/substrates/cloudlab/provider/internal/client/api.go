package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// CreateExperiment sends POST /experiments (201).
func (c *Client) CreateExperiment(ctx context.Context, in ExperimentCreate) (*Experiment, error) {
	var out Experiment
	if err := c.do(ctx, http.MethodPost, "/experiments", in, &out); err != nil {
		return nil, err
	}
	if out.ID == "" {
		return nil, errors.New("cloudlab portal: POST /experiments: answer has no id")
	}
	return &out, nil
}

// GetExperiment sends GET /experiments/{id}; id is a UUID or `project,name`.
func (c *Client) GetExperiment(ctx context.Context, id string) (*Experiment, error) {
	var out Experiment
	if err := c.do(ctx, http.MethodGet, "/experiments/"+seg(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListExperiments sends GET /experiments?project=.
func (c *Client) ListExperiments(ctx context.Context, project string) ([]Experiment, error) {
	var out struct {
		Experiments []Experiment `json:"experiments"`
	}
	path := "/experiments"
	if project != "" {
		path += "?project=" + url.QueryEscape(project)
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Experiments, nil
}

// ExtendExperiment sends PUT /experiments/{id} {extend_by}.
func (c *Client) ExtendExperiment(ctx context.Context, id string, hours int64, reason string) (*Experiment, error) {
	if hours <= 0 {
		return nil, fmt.Errorf("an extension must be a positive number of hours, not %d", hours)
	}
	var out Experiment
	err := c.do(ctx, http.MethodPut, "/experiments/"+seg(id), ExtensionRequest{ExtendBy: hours, Reason: reason}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteExperiment sends DELETE /experiments/{id}; a 404 counts as success.
func (c *Client) DeleteExperiment(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/experiments/"+seg(id), nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// GetManifests sends GET /experiments/{id}/manifests. The spec types it as a map of
// strings (aggregate URN -> RSpec XML) but describes an array; both are accepted
// (a list gets keys "0", "1", ...).
func (c *Client) GetManifests(ctx context.Context, id string) (map[string]string, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/experiments/"+seg(id)+"/manifests", nil, &raw); err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err == nil {
		return m, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("cloudlab portal: manifests of %s: neither a map nor a list of strings", id)
	}
	m = make(map[string]string, len(l))
	for i, s := range l {
		m[fmt.Sprint(i)] = s
	}
	return m, nil
}

// NodeActions are the per-node operations of POST /experiments/{id}/node/{client_id}/{action}.
var NodeActions = []string{"reboot", "powercycle", "reload", "start", "stop"}

// NodeAction runs one node operation (200 AggregateNode).
func (c *Client) NodeAction(ctx context.Context, expID, clientID, action string) (*AggregateNode, error) {
	ok := false
	for _, a := range NodeActions {
		ok = ok || a == action
	}
	if !ok {
		return nil, fmt.Errorf("unknown node action %q (one of %v)", action, NodeActions)
	}
	var out AggregateNode
	path := "/experiments/" + seg(expID) + "/node/" + seg(clientID) + "/" + action
	if err := c.do(ctx, http.MethodPost, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetNode sends GET /experiments/{id}/node/{client_id}.
func (c *Client) GetNode(ctx context.Context, expID, clientID string) (*AggregateNode, error) {
	var out AggregateNode
	if err := c.do(ctx, http.MethodGet, "/experiments/"+seg(expID)+"/node/"+seg(clientID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateProfile sends POST /profiles (201; 429 retried).
func (c *Client) CreateProfile(ctx context.Context, in ProfileCreate) (*Profile, error) {
	var out Profile
	if err := c.do(ctx, http.MethodPost, "/profiles", in, &out); err != nil {
		return nil, err
	}
	if out.ID == "" {
		return nil, errors.New("cloudlab portal: POST /profiles: answer has no id")
	}
	return &out, nil
}

// GetProfile sends GET /profiles/{id}; id is a UUID or `project,name`.
func (c *Client) GetProfile(ctx context.Context, id string) (*Profile, error) {
	var out Profile
	if err := c.do(ctx, http.MethodGet, "/profiles/"+seg(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateProfile sends PATCH /profiles/{id}.
func (c *Client) UpdateProfile(ctx context.Context, id string, in ProfileUpdate) (*Profile, error) {
	var out Profile
	if err := c.do(ctx, http.MethodPatch, "/profiles/"+seg(id), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteProfile sends DELETE /profiles/{id}; a 404 counts as success.
func (c *Client) DeleteProfile(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/profiles/"+seg(id), nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}
